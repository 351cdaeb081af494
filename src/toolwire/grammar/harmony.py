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
the text ` to=...` would be content. Pure: no xgrammar import.
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

    def heads(self, heads: list[str], recipient_first: Sequence[str] = ()) -> Element:
        """A message's header: each of `heads`, bare or after the shape's `start`;
        each of `recipient_first` only after it."""
        start = self.shape.start
        options = [h for head in heads for h in (head, start + head)]
        options += [start + head for head in recipient_first]
        return {"type": "or", "elements": [self.seq(self.lex.elements(o)) for o in options]}

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

    def call(self, spec: ToolSpec, excludes: list[str]) -> Element:
        """A header the parser routes to a call to `spec`, the arguments, the call's end."""
        head = self.heads(
            [h.replace("{name}", spec.name) for h in self.shape.calls],
            [h.replace("{name}", spec.name) for h in self.shape.calls_after_start],
        )
        args = {"type": "json_schema", "json_schema": dict(spec.schema), "excludes": excludes}
        return self.seq([head, args, *self.lex.elements(self.call_end)])

    def calls(self, specs: Sequence[ToolSpec], one: bool, excludes: list[str]) -> Element:
        options = [self.call(s, excludes) for s in specs]
        call = options[0] if len(options) == 1 else {"type": "or", "elements": options}
        return call if one else {"type": "plus", "content": call}


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
