"""Tags for header-routed messages (`HeaderShape`: gpt-oss's harmony), element by element.

The output starts at the first header (the prompt ends with `<|start|>assistant`).
Every message's header may be preceded by the shape's `start` (SEP, `<|start|>assistant`;
the renderer writes it before each call, the parser also reads a header right after
`<|end|>` or `<|call|>`). Built from the `Format`'s delimiters as `build.Delimiters`
spells them, so at token level every delimiter is its o200k_harmony id. For gpt-oss:

    analysis   [SEP]<|channel|>analysis<|message|> TEXT <|end|>        (shape.reasoning)
    call       [SEP]<|channel|>commentary to=functions.NAME[ ]<|constrain|>json<|message|>
               JSON(schema) <|call|>;  also SEP followed by the recipient-first
               headers ` to=functions.NAME<|channel|>commentary [<|constrain|>]json`
                                                    (shape.calls, shape.calls_after_start)
    final      [SEP]<|channel|>final<|message|> TEXT (<|end|> | <|return|> | end of output)
                                                                         (shape.content)

    auto       [analysis] (final | calls)      calls: call+ (one when not parallel)
    required   [analysis] calls
    named      [analysis] one call to that tool
    none       [analysis] final

TEXT holds no delimiter (token level: no delimiter id). The headers are the forms
`formats.gpt_oss.route` reads and XGrammar's built-in harmony template writes; a
recipient-first header is not allowed as the first message without a leading
`<|start|>assistant`: the parser reads the prompt's own header as ended there, so
the text ` to=...` would be content.

The call headers are factored around NAME: the text before it is one `or` over the
forms that take the same endings, then one `or` over the tools, each NAME followed by
its endings, arguments and `<|call|>`. The language is the one the unfactored product
(forms x tools) spells; a matcher's live states after `commentary to=functions.` are one
per tool instead of one per tool and form. Pure: no xgrammar import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.formats.spec import Format, HeaderShape
from toolwire.grammar.build import Delimiters
from toolwire.grammar.policy import ToolSpec

__all__ = ["harmony_format"]

Element = dict[str, Any]


class _Harmony:
    def __init__(self, fmt: Format, shape: HeaderShape, lex: Delimiters) -> None:
        self.shape = shape
        self.lex = lex
        self.call_end = fmt.call[1] or ""
        self.all_texts = list(fmt.delimiters)
        self.all_ids = lex.ids(fmt.delimiters)

    def seq(self, elements: list[Element]) -> Element:
        return {"type": "sequence", "elements": elements}

    def heads(self, heads: list[str]) -> Element:
        """A message's header: each of `heads`, bare or after the shape's `start`."""
        return self.any_of([h for head in heads for h in (head, self.shape.start + head)])

    def text(self, end: str) -> Element:
        """Text without delimiters, then `end`."""
        (piece,) = self.lex.pieces(end)
        if isinstance(piece, int):
            free = {"type": "any_tokens", "exclude_tokens": [i for i in self.all_ids if i != piece]}
            return {
                "type": "tag",
                "begin": "",
                "content": free,
                "end": {"type": "token", "token": piece},
            }
        free = {"type": "any_text", "excludes": [d for d in self.all_texts if d != end]}
        return {"type": "tag", "begin": "", "content": free, "end": end}

    def open_text(self) -> Element:
        """Text without delimiters up to the end of output."""
        if self.lex.token_level:
            return {"type": "any_tokens", "exclude_tokens": self.all_ids}
        return {"type": "any_text", "excludes": self.all_texts}

    def analysis(self) -> Element:
        head, end = self.shape.reasoning
        return self.seq([self.heads([head]), self.text(end)])

    def final(self) -> Element:
        head, ends = self.shape.content
        texts = [*(self.text(end) for end in ends), self.open_text()]
        return self.seq([self.heads([head]), {"type": "or", "elements": texts}])

    def calls(self, specs: Sequence[ToolSpec], one: bool, excludes: list[str]) -> Element:
        """A header the parser routes to a call, the arguments, the call's end; the
        header forms factored around the name (`_header_classes`), so the text common to
        every tool's header is one element, not one per tool (a grammar matcher keeps a
        state per live alternative: 50 tools x 6 forms at `<|channel|>commentary`)."""
        options = []
        for prefixes, suffixes in _header_classes(self.shape):
            tools = [
                self.seq(
                    [
                        *self.lex.elements(spec.name),
                        self.any_of(suffixes),
                        self.arguments(spec, excludes),
                        *self.lex.elements(self.call_end),
                    ]
                )
                for spec in specs
            ]
            body = tools[0] if len(tools) == 1 else {"type": "or", "elements": tools}
            options.append(self.seq([self.any_of(prefixes), body]))
        call = options[0] if len(options) == 1 else {"type": "or", "elements": options}
        return call if one else {"type": "plus", "content": call}

    def arguments(self, spec: ToolSpec, excludes: list[str]) -> Element:
        return {"type": "json_schema", "json_schema": dict(spec.schema), "excludes": excludes}

    def any_of(self, texts: Sequence[str]) -> Element:
        """One of `texts` (delimiters as the lexicon spells them)."""
        options = [self.seq(self.lex.elements(t)) for t in texts]
        return options[0] if len(options) == 1 else {"type": "or", "elements": options}


def _header_classes(shape: HeaderShape) -> list[tuple[list[str], list[str]]]:
    """The call headers as (texts before `{name}`, texts after it): every combination
    of a class's prefixes and suffixes is one of the shape's headers (`calls` bare or
    after `start`, `calls_after_start` after it), and every header is in one class.
    Prefixes that take the same suffixes share a class."""
    pairs = [h.split("{name}") for h in shape.calls]
    late = [h.split("{name}") for h in shape.calls_after_start]
    headers = [(p, s) for p, s in pairs] + [(shape.start + p, s) for p, s in [*pairs, *late]]
    after: dict[str, list[str]] = {}
    for prefix, suffix in headers:
        after.setdefault(prefix, [])
        if suffix not in after[prefix]:
            after[prefix].append(suffix)
    classes: dict[tuple[str, ...], list[str]] = {}
    for prefix, suffixes in after.items():
        classes.setdefault(tuple(suffixes), []).append(prefix)
    return [(prefixes, list(suffixes)) for suffixes, prefixes in classes.items()]


def harmony_format(
    fmt: Format,
    shape: HeaderShape,
    lex: Delimiters,
    specs: Sequence[ToolSpec],
    choice: str,
    *,
    parallel: bool,
    exclude: bool,
) -> Element:
    """The structural tag's `format` for a header-routed format. `exclude`: argument strings may not
    hold a delimiter (its text, and so its id: XGrammar's JSON strings otherwise admit
    special tokens, which the id-gated parser reads as structure)."""
    h = _Harmony(fmt, shape, lex)
    excludes = list(fmt.delimiters) if exclude else []
    if choice == "none" or not specs:
        body = h.final()
    else:
        calls = h.calls(specs, choice == "named" or not parallel, excludes)
        body = calls if choice != "auto" else {"type": "or", "elements": [h.final(), calls]}
    return h.seq([{"type": "optional", "content": h.analysis()}, body])
