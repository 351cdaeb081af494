"""What a format is: delimiters (data) and an argument syntax (a small pure object).

A format names its delimiters as text. The parser resolves each against the served
tokenizer: a delimiter whose text holds an added token is matched only where that
token's *id* occurs in the output; the same characters spelled from ordinary ids are
text. `Format` holds no parsing code; `CallSyntax` objects (their protocol is in
`toolwire.syntax.protocol`) parse what stands between a call's delimiters (its name
and arguments), one object per call.

The shape every format fits (all parts optional but `call`)::

    content  [reasoning.open  reasoning text  reasoning.close]  content
    [section.open]  call.open BODY [call.close]  call.open BODY [call.close] ... [section.close]
    content

BODY is parsed by the format's `CallSyntax`; text inside it may hold the format's
inner `marks` (for example DeepSeek's `<｜tool▁sep｜>`), which reach the syntax in their
structural form (`CallContext.marks`).

Two shapes do not fit that line, and each is one more piece of data:

* `header` (harmony): messages `<|start|>HEADER<|message|>BODY<|end|>`, where a pure
  hook reads the header and routes the body to reasoning, content or a call whose name
  the header gives (`CallContext.name`); `call` then names only the closing delimiter.
* `anchor` (Llama 3 JSON, pythonic): calls that no token introduces. A body may begin
  only at the start of a line (or after one of `anchor.after`, or a call), with one of
  `anchor.begins`; a body that ends saying another follows (`Chained.follows`, after a
  list's separator) is followed by the next at once. Matched as text: not gated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

# What a grammar writes besides the delimiters: plain data, no grammar code.
from toolwire.formats.shape import AnchoredShape, GrammarShape, HeaderShape, Params, Shape

# The call-syntax protocol lives with the syntaxes; re-exported here, where formats
# have always imported it from.
from toolwire.syntax.protocol import CallContext, CallSyntax, Chained, Reject

__all__ = [
    "Anchor",
    "AnchoredShape",
    "Bare",
    "CallContext",
    "CallSyntax",
    "Chained",
    "Format",
    "GrammarShape",
    "Header",
    "HeaderShape",
    "Params",
    "Reject",
    "RenderedCall",
    "Route",
    "Shape",
    "value_text",
]


#: A call as the tests and tools render it: (name, arguments object).
RenderedCall = tuple[str, Mapping[str, Any]]


def value_text(value: object) -> str:
    """A parameter's value as the tagged formats write it: a string as itself, any
    other value as its JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class Route(NamedTuple):
    """Where a header sends the message body that follows it."""

    kind: Literal["reasoning", "content", "call"]
    #: The tool's name, for a call.
    name: str | None = None
    #: Header text that is prose, not metadata (content before the body; Inkling's
    #: header is a tool's name, anything else there is what the model wrote).
    content: str = ""


@dataclass(frozen=True)
class Header:
    """Messages whose header routes their body (harmony, Inkling).

    Outside a header, any of `opens` begins one; inside, the first of `opens` begins a
    new header (a new message) and the others, with `marks`, are header text. `close`
    ends the header (any of them, when several: Inkling's block kinds, which `route`
    tells apart); the body then runs until one of `ends`, the format's call close, or
    a new header.
    """

    opens: tuple[str, ...]
    close: str | tuple[str, ...]
    ends: tuple[str, ...]
    #: Header text -> the route of the body (reads the literal text, delimiters included).
    route: Callable[[str], Route]
    marks: tuple[str, ...] = ()
    #: The prompt opens the first header (Inkling's ends with `<|message_model|>`):
    #: the output begins inside it.
    initial: bool = False
    #: What the text of a header that never closes is (a message that ends inside it,
    #: a new header, the output's end): "markup" (harmony's roles and channels, all
    #: structure) or "content" (text the model wrote before any block kind; the opener
    #: stays markup).
    unclosed: Literal["markup", "content"] = "markup"

    @property
    def closes(self) -> tuple[str, ...]:
        """Every delimiter that closes a header."""
        return (self.close,) if isinstance(self.close, str) else self.close


@dataclass(frozen=True)
class Anchor:
    """Where a call that no token introduces may begin: the text-gated fallback.

    A body begins at the first non-whitespace character of a line (the output's
    start included), of the text after one of `after`, or of the text right after a
    call, when that character is one of `begins`. Prose is never taken for a call
    elsewhere; a body that turns out not to be a call is released as content.
    """

    begins: str
    after: tuple[str, ...] = ()
    #: The text every body begins with, when more than its first character (`begins`
    #: then holds that character): Phi-4-mini's `functools[`. The body's syntax reads
    #: it (a line that only begins like it is released as content), and a grammar's
    #: free text never holds it.
    word: str = ""


@dataclass(frozen=True)
class Bare:
    """A call body that may stand alone, without the call's delimiters (models omit
    the wrapper: Qwen3-Coder's `<function=NAME>...</function>` with no `<tool_call>`).

    It begins with `opener` and ends itself. Such a call is provisional: held, and
    returned only once its body ended and it names a declared tool; otherwise every
    character is content. `opener` is text, so the parser recovers such bodies only
    when asked to (`Parser(bare_calls=True)`, which is then not gated).
    """

    opener: str
    #: Builds the syntax of a standalone body, fed what follows `opener`.
    syntax: Callable[[CallContext], CallSyntax]


@dataclass(frozen=True)
class Format:
    """A model family's output format, as data."""

    #: Registry name (`hermes`, `qwen3`, ...).
    name: str
    #: (open, close) delimiters of a call; close None when the body ends itself.
    call: tuple[str, str | None]
    #: Builds the syntax object for one call body.
    syntax: Callable[[CallContext], CallSyntax]
    #: Renders calls in the native format (for tests, benchmarks and grammars).
    render: Callable[[Sequence[RenderedCall]], str]
    #: (open, close) delimiters of reasoning, or None.
    reasoning: tuple[str, str] | None = None
    #: (open, close) delimiters around a group of calls, or None. A call found outside
    #: its section is provisional: held until it closes, even when streaming.
    section: tuple[str, str] | None = None
    #: With a section: False when a call is recognized only inside it (its delimiters
    #: may then be plain text, as MiniMax's `<invoke name="`); True when a call may also
    #: stand alone, provisionally (models that omit the wrapper).
    loose_calls: bool = True
    #: Whether a call may begin inside reasoning that has not closed (the call then
    #: ends it), as the family's models are documented to write. False: reasoning
    #: runs to its close, and a call's or section's delimiter inside it is reasoning
    #: text (a quoted call), as the family's templates write calls after it. Formats
    #: whose calls are messages of their own (harmony's headers, Inkling's blocks)
    #: set True: the call's header or block ends the reasoning message.
    calls_in_reasoning: bool = False
    #: A call body that may stand alone, or None.
    bare: Bare | None = None
    #: Further (open, close) reasoning pairs the model may use instead of `reasoning`
    #: (Kimi's `◁think▷`...`◁/think▷`); any close ends reasoning, however it opened.
    more_reasoning: tuple[tuple[str, str], ...] = ()
    #: Delimiters that appear inside a call body.
    marks: tuple[str, ...] = ()
    #: Whether output starts inside reasoning when the caller does not say.
    starts_in_reasoning: bool = False
    #: Added tokens that carry text the format needs (never dropped).
    keep: tuple[str, ...] = field(default=())
    #: Renders reasoning and content where wrapping them is not just the reasoning
    #: delimiters (harmony's channels); None for the default.
    render_text: Callable[[str | None, str | None], str] | None = None
    #: Messages routed by their header (harmony), or None.
    header: Header | None = None
    #: Calls introduced by no token (`call[0]` is then ""), or None.
    anchor: Anchor | None = None
    #: Text the chat templates of this family write besides the delimiters (turn
    #: markers such as ChatML's `<|im_start|>`). Only format detection reads it, to
    #: tell this format from another that writes the same calls.
    template_markers: tuple[str, ...] = ()
    #: What a structural tag writes around the calls (`toolwire.formats.shape`); None:
    #: no structural tag for this format.
    grammar: GrammarShape | None = None

    def render_output(
        self,
        *,
        reasoning: str | None = None,
        content: str | None = None,
        calls: Sequence[RenderedCall] = (),
        prefilled: bool = False,
    ) -> str:
        """A whole output in this format, as the model would write it.

        `prefilled`: the prompt opened the reasoning block, so the output starts inside
        it (its opening delimiter is not part of the output).
        """
        if self.render_text is not None:
            text = self.render_text(reasoning, content)
        else:
            text = ""
            if reasoning is not None and self.reasoning is not None:
                opener = "" if prefilled else self.reasoning[0]
                text += f"{opener}{reasoning}{self.reasoning[1]}\n\n"
            text += content or ""
        if calls:
            text += ("\n\n" if content else "") + self.render(calls)
        return text

    @property
    def delimiters(self) -> tuple[str, ...]:
        """Every delimiter of the format, outer first."""
        out: list[str] = []
        for pair in (self.reasoning, *self.more_reasoning, self.section, self.call):
            if pair:
                out += [d for d in pair if d]
        out += self.marks
        if self.header is not None:
            header = self.header
            out += [*header.opens, *header.closes, *header.ends, *header.marks]
        if self.anchor is not None:
            out += self.anchor.after
        return tuple(dict.fromkeys(out))

    @property
    def reasoning_pairs(self) -> tuple[tuple[str, str], ...]:
        """Every (open, close) reasoning pair, the rendered one first."""
        return ((self.reasoning,) if self.reasoning else ()) + self.more_reasoning

    @property
    def entries(self) -> tuple[str, ...]:
        """The delimiters that open call structure from content (gating rests on them)."""
        if self.header is not None:  # and the call's opener where one stands alone
            return self.header.opens + ((self.call[0],) if self.call[0] else ())
        if self.section is None:
            return (self.call[0],)
        return (self.section[0], self.call[0]) if self.loose_calls else (self.section[0],)
