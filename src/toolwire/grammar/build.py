"""Builds XGrammar structural-tag formats from a `Format`, its `Shape` and the tools.

Data flow::

    Format (delimiters) + Shape (text around arguments) + ToolSpecs + choice
        -> Delimiters: template text -> elements; each delimiter is split into its
           tokens (token-level: `{"type": "token"}` by id) and text (`const_string`)
           (the grammar's spelling; the parser's `toolwire.lexicon` is another matter)
        -> call tag      Tag(call.open, head ARGS tail, call.close)
        -> section tag   Tag(section.open, calls joined by separator, section.close)
        -> by choice     auto: triggered (an entry that is text then a token, as
                         DSML's `<` + `｜DSML｜`, has no token trigger: free text
                         alternates with whole groups); required: >=1 call, no text;
                         named: one call; none: free text without tool delimiters
        -> reasoning     a leading block (mandatory when the output starts inside it,
                         optional otherwise); its text excludes every tool delimiter

Invariants: a delimiter the grammar writes is, at token level, the delimiter's own
id (never its text, which a gated parser reads as text); free text and argument
strings exclude every delimiter, so the parser cannot see structure the grammar did
not write. Pure: no xgrammar import here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from toolwire.formats.spec import Format, Params, Shape
from toolwire.grammar.anchored import pythonic_list
from toolwire.grammar.element_values import ElementValues
from toolwire.grammar.gemma_values import GemmaValues
from toolwire.grammar.policy import ToolSpec
from toolwire.tokenizer import Tokenizer
from toolwire.tools import schema_type

__all__ = ["Delimiters", "build_format"]

#: The string quote XGrammar's `gemma` json_schema style writes (Gemma 4's).
XGRAMMAR_GEMMA_QUOTE = '<|"|>'

Element = dict[str, Any]
Piece = str | int  # text, or a token id

#: Optional whitespace before the first call where no free text is allowed.
_LEADING_SPACE: Element = {"type": "regex", "pattern": "[ \\n]{0,2}"}
#: A parameter name when the schema names none (relaxed arguments).
_ANY_KEY = "[A-Za-z_][A-Za-z0-9_]{0,15}"


class Delimiters:
    """A format's delimiters as the grammar writes them: template text -> elements.

    At token level a delimiter is written as its added tokens' ids (and the text
    between them), else as its text. (Held as `lex` by the builders.)
    """

    def __init__(self, fmt: Format, tokenizer: Tokenizer | None, token_level: bool) -> None:
        self.token_level = token_level and tokenizer is not None
        self._delimiters = sorted(fmt.delimiters, key=len, reverse=True)
        self._pieces: dict[str, list[Piece]] = {}
        for delimiter in self._delimiters:
            self._pieces[delimiter] = (
                _split(delimiter, tokenizer) if self.token_level and tokenizer else [delimiter]
            )

    def pieces(self, text: str) -> list[Piece]:
        """`text` as text and token pieces (adjacent text merged)."""
        out: list[Piece] = []
        pos = 0
        while pos < len(text):
            found = min(
                ((text.find(d, pos), d) for d in self._delimiters if text.find(d, pos) >= 0),
                key=lambda hit: (hit[0], -len(hit[1])),
                default=None,
            )
            stop = found[0] if found else len(text)
            if stop > pos:
                _append(out, text[pos:stop])
            if found is None:
                break
            for piece in self._pieces[found[1]]:
                _append(out, piece)
            pos = stop + len(found[1])
        return out

    def elements(self, text: str) -> list[Element]:
        return [_element(p) for p in self.pieces(text)]

    def ids(self, delimiters: Sequence[str]) -> list[int]:
        """The token ids within these delimiters (token level only)."""
        out: list[int] = []
        for delimiter in delimiters:
            out += [p for p in self._pieces.get(delimiter, ()) if isinstance(p, int)]
        return list(dict.fromkeys(out))


def _split(text: str, tokenizer: Tokenizer) -> list[Piece]:
    """A delimiter as its added-token ids and the text between them."""
    out: list[Piece] = []
    pending: list[int] = []
    for token in tokenizer.encode(text):
        if token in tokenizer.added_ids:
            if pending:
                out.append(tokenizer.decode(pending))
                pending = []
            out.append(token)
        else:
            pending.append(token)
    if pending:
        out.append(tokenizer.decode(pending))
    return out


def _append(out: list[Piece], piece: Piece) -> None:
    if isinstance(piece, str) and out and isinstance(out[-1], str):
        out[-1] += piece
    elif piece != "":
        out.append(piece)


def _element(piece: Piece) -> Element:
    if isinstance(piece, int):
        return {"type": "token", "token": piece}
    return {"type": "const_string", "value": piece}


def _edge(piece: Piece) -> str | Element:
    """A piece as a tag's `begin` or `end` (a string or a token element)."""
    return piece if isinstance(piece, str) else _element(piece)


def _sequence(elements: list[Element]) -> Element:
    if not elements:
        return {"type": "const_string", "value": ""}
    if len(elements) == 1:
        return elements[0]
    return {"type": "sequence", "elements": elements}


def _either(elements: list[Element]) -> Element:
    return elements[0] if len(elements) == 1 else {"type": "or", "elements": elements}


def _calls(bodies: list[Element]) -> Element:
    """One of the tools' call bodies as a radix tree of the text they begin with: the
    text all begin with written once (a hermes head `\n{"name": "` before the names),
    then one branch per next character, each its own tree, down to where a body's
    text ends. XGrammar then follows one item per branch, not one per tool, until the
    bodies differ (Qwen3 at 50 tools: ~30 µs a token at the name's first token, ~8 so)."""
    if len(bodies) < 2:
        return _either(bodies)
    firsts = [_first(b) for b in bodies]
    texts = [f["value"] for f in firsts if f is not None and f.get("type") == "const_string"]
    if len(texts) < len(bodies):
        return _either(bodies)
    prefix = min(texts, key=len)
    while prefix and not all(t.startswith(prefix) for t in texts):
        prefix = prefix[:-1]
    rest = [_after_prefix(b, len(prefix)) for b in bodies] if prefix else bodies
    branches: dict[str, list[Element]] = {}  # by the next character ("": no more text)
    for body in rest:
        first = _first(body)
        text = first["value"] if first is not None and first.get("type") == "const_string" else ""
        branches.setdefault(text[:1], []).append(body)
    either = _either(
        [
            _calls(members) if key and len(members) > 1 else _either(members)
            for key, members in branches.items()
        ]
    )
    return _sequence([_element(prefix), either]) if prefix else either


def _first(body: Element) -> Element | None:
    if body.get("type") == "sequence":
        return body["elements"][0] if body["elements"] else None
    return body


def _after_prefix(body: Element, size: int) -> Element:
    """`body` without the first `size` characters of its leading text."""
    elements = list(body["elements"]) if body.get("type") == "sequence" else [body]
    head = elements[0]["value"][size:]
    return _sequence(([_element(head)] if head else []) + elements[1:])


def _tag(
    lex: Delimiters, open_text: str, content: list[Element], close_text: str | None
) -> Element:
    """Tag(first piece of open, rest + content + all but the last piece of close, last)."""
    opening = lex.pieces(open_text)
    closing = lex.pieces(close_text) if close_text else []
    inner = [_element(p) for p in opening[1:]] + content
    inner += [_element(p) for p in closing[:-1]]
    return {
        "type": "tag",
        "begin": _edge(opening[0]),
        "content": _sequence(inner),
        "end": _edge(closing[-1]) if closing else "",
    }


class _Builder:
    def __init__(
        self, fmt: Format, shape: Shape, lex: Delimiters, parallel: bool, exclude: bool
    ) -> None:
        self.fmt = fmt
        self.shape = shape
        self.lex = lex
        self.parallel = parallel
        self.all_texts = list(fmt.delimiters)
        self.all_ids = lex.ids(fmt.delimiters)
        # What a parser acts on inside a call body: another call, the end of this one.
        inside = [fmt.call[0], fmt.call[1], fmt.section[1] if fmt.section else None]
        inside.append(shape.list_end)
        if fmt.header is not None:  # a new message ends a body, as its end does
            inside += [*fmt.header.opens, *fmt.header.ends]
        self.in_strings = [d for d in inside if d] if exclude else []

    # -- free text -----------------------------------------------------------------

    def free(self, allowed: Sequence[str] = ()) -> Element:
        """Free text that holds no delimiter but `allowed` (a trigger or an end)."""
        if self.lex.token_level:
            return {"type": "any_tokens", "exclude_tokens": self.excluded_ids(allowed)}
        return {"type": "any_text", "excludes": self.excluded(allowed)}

    def excluded(self, allowed: Sequence[str] = ()) -> list[str]:
        """The delimiters free text may not hold: all but `allowed` and a header's
        opener (Inkling's `<|message_model|>`: a new message, which the model writes
        between blocks; what follows it still obeys the grammar)."""
        header = self.fmt.header.opens if self.fmt.header is not None else ()
        return [d for d in self.all_texts if d not in allowed and d not in header]

    def excluded_ids(self, allowed: Sequence[str] = ()) -> list[int]:
        """`excluded`, as the ids of the delimiters' tokens."""
        kept = set(self.lex.ids([d for d in self.all_texts if d not in self.excluded(allowed)]))
        return [i for i in self.all_ids if i not in kept]

    # -- calls ---------------------------------------------------------------------

    def arguments(self, spec: ToolSpec) -> Element:
        if self.shape.params is not None and (self.lex.token_level or self.shape.style == "params"):
            return self.params(spec.schema, self.shape.params)
        if self.shape.style == "elements":
            return ElementValues(self.namespace(), self.text()).members(spec.schema, 0, "\n")
        if self.shape.style == "gemma" and self.lex.token_level:
            # The quote is a token: written by id, element by element.
            (quote,) = self.lex.ids([self.shape.quote])
            return GemmaValues(quote, self.free()).object(spec.schema)
        if self.shape.style == "gemma" and self.shape.quote != XGRAMMAR_GEMMA_QUOTE:
            # Text level with a quote XGrammar's style does not write: element by element.
            return GemmaValues(self.shape.quote, self.free()).object(spec.schema)
        return {
            "type": "json_schema",
            "json_schema": dict(spec.schema),
            "style": self.shape.style,
            "excludes": self.in_strings,
        }

    def namespace(self) -> Element:
        """The token before every tag (`Shape.namespace`): by id at token level."""
        ns = self.shape.namespace
        if self.lex.token_level:
            (token,) = self.lex.ids([d for d in self.fmt.delimiters if d.startswith(ns)])
            return _element(token)
        return _element(ns)

    def text(self) -> Element:
        """Value text: no delimiter, and no namespace token (`Shape.namespace`)."""
        if self.lex.token_level:
            return self.free()
        return {"type": "any_text", "excludes": [*self.all_texts, self.shape.namespace]}

    def head(self, spec: ToolSpec) -> list[Element]:
        name = json.dumps(spec.name, ensure_ascii=False)[1:-1]
        if self.shape.name == "raw":
            name = spec.name
        out: list[Element] = []
        for n, part in enumerate(self.shape.head.split("{index}")):
            if n:
                out.append({"type": "regex", "pattern": "[0-9]{1,6}"})
            out += self.lex.elements(part.replace("{name}", name))
        return out

    def item(self, spec: ToolSpec, tail: str | None = None) -> Element:
        tail = self.shape.tail if tail is None else tail
        return _sequence([*self.head(spec), self.arguments(spec), *self.lex.elements(tail)])

    def call(self, specs: Sequence[ToolSpec], *, one: bool = False) -> Element:
        if self.shape.items is not None:
            return self.listed(specs, one=one or not self.parallel)
        close, tail = self.fmt.call[1], self.shape.tail
        if close is None and self.shape.style == "elements":
            # A body that ends itself, with text values inside: XGrammar wants such a
            # tag to have an end, and the tail is where the body ends.
            close, tail = tail, ""
        bodies = [self.item(spec, tail) for spec in specs]
        return _tag(self.lex, self.fmt.call[0], [_calls(bodies)], close)

    def listed(self, specs: Sequence[ToolSpec], *, one: bool) -> Element:
        """One call.open, then the calls as the items of one list, then `list_end`."""
        shape = self.shape
        assert shape.items is not None
        if shape.style == "pythonic":
            # Inside the call tokens, a string must not begin a delimiter's text
            # (`<|...|>`, OLMo 3's `</function_calls>`).
            marks = (*(d for d in self.fmt.call if d), *self.fmt.marks)
            after = {d[1] for d in marks if d.startswith("<") and len(d) > 1}
            items = pythonic_list(
                specs,
                one,
                no_markup="".join(sorted(after)),
                items=shape.items,
                separator=shape.separator,
                json_names=shape.json_names,
            )
        else:
            item = _calls([self.item(spec) for spec in specs])
            more = {
                "type": "star",
                "content": _sequence([*self.lex.elements(shape.separator), item]),
            }
            opening, closing = shape.items
            content = [*self.lex.elements(opening), item, *([] if one else [more])]
            # The list's closing text ends the tag (XGrammar needs a non-empty end).
            return _tag(self.lex, self.fmt.call[0], content, closing + shape.list_end)
        return _tag(self.lex, self.fmt.call[0], [items], shape.list_end or None)

    def group(self, specs: Sequence[ToolSpec], *, one: bool) -> Element:
        """The calls as the format groups them: a section of calls, or one bare call
        (or one list of calls)."""
        call = self.call(specs, one=one)
        if self.fmt.section is None:
            return call
        calls = {
            "type": "tags_with_separator",
            "tags": [call],
            "separator": self.shape.separator,
            "at_least_one": True,
            "stop_after_first": one or not self.parallel,
        }
        before, after = self.shape.section_text
        content = [*self.lex.elements(before), calls, *self.lex.elements(after)]
        return _tag(self.lex, self.fmt.section[0], content, self.fmt.section[1])

    def choice(self, choice: str, specs: Sequence[ToolSpec]) -> Element:
        fmt = self.fmt
        if choice == "none" or not specs:
            tool = [*(fmt.section or ()), *(d for d in fmt.call if d), *fmt.marks]
            if self.lex.token_level:
                return {"type": "any_tokens", "exclude_tokens": self.lex.ids(tool)}
            return {"type": "any_text", "excludes": tool}
        if choice == "named":
            return _sequence([_LEADING_SPACE, self.group(specs, one=True)])
        if choice == "required" and (fmt.section is not None or self.shape.items is not None):
            return _sequence([_LEADING_SPACE, self.group(specs, one=False)])
        if choice == "required":
            calls = {
                "type": "tags_with_separator",
                "tags": [self.call(specs)],
                "separator": self.shape.separator,
                "at_least_one": True,
                "stop_after_first": not self.parallel,
            }
            return _sequence([_LEADING_SPACE, calls])
        group = self.group(specs, one=False)
        entry = fmt.section[0] if fmt.section else fmt.call[0]
        begin = group["begin"]
        pieces = self.lex.pieces(entry)
        if self.lex.token_level and isinstance(begin, str) and isinstance(pieces[1], int):
            # Text, then a token (DSML's `<` + `｜DSML｜`): no token trigger exists, so
            # free text (no delimiter id) alternates with whole call groups.
            free = self.free()
            again = _sequence([group, free])
            more = {"type": "optional" if not self.parallel else "star", "content": again}
            return _sequence([free, more])
        if isinstance(begin, dict):
            return {
                "type": "token_triggered_tags",
                "trigger_tokens": [begin["token"]],
                "tags": [group],
                "exclude_tokens": [i for i in self.excluded_ids() if i != begin["token"]],
                "stop_after_first": not self.parallel,
            }
        return {
            "type": "triggered_tags",
            "triggers": [begin],
            "tags": [group],
            "excludes": [d for d in self.excluded() if d not in entry],
            "stop_after_first": not self.parallel,
        }

    # -- reasoning -----------------------------------------------------------------

    def reasoning(self, inside: bool) -> Element | None:
        pair = self.fmt.reasoning
        if pair is None:
            return None
        opening, closing = pair
        if isinstance(self.lex.pieces(closing)[-1], int):
            text = self.free(allowed=[closing])
        else:  # a text end is seen only by text-level free text
            text = {"type": "any_text", "excludes": [d for d in self.all_texts if d != closing]}
        if inside:
            closing_pieces = self.lex.pieces(closing)
            content = [text] + [_element(p) for p in closing_pieces[:-1]]
            return {
                "type": "tag",
                "begin": "",
                "content": _sequence(content),
                "end": _edge(closing_pieces[-1]),
            }
        return {"type": "optional", "content": _tag(self.lex, opening, [text], closing)}

    # -- tagged parameters, element by element (token level) -----------------------

    def params(self, schema: Mapping[str, Any], params: Params) -> Element:
        props = schema.get("properties")
        if not isinstance(props, Mapping):
            generic = self.param("{key}", {}, params, key_pattern=_ANY_KEY)
            return {"type": "star", "content": generic}
        required = set(schema.get("required") or ())
        out: list[Element] = []
        for key, sub in props.items():
            one = self.param(key, sub if isinstance(sub, Mapping) else {}, params)
            out.append(one if key in required else {"type": "optional", "content": one})
        return _sequence(out)

    def type_text(self, kind: str | None, params: Params) -> Element:
        """The text a `{type}` placeholder writes for a value of JSON type `kind`."""
        types = dict(params.types or ())
        if kind is not None and kind in types:
            return _element(types[kind])
        others = sorted({t for k, t in types.items() if k != "string" and t != types.get("string")})
        return _either([_element(t) for t in others])

    def param(
        self,
        key: str,
        schema: Mapping[str, Any],
        params: Params,
        key_pattern: str | None = None,
    ) -> Element:
        kind = schema_type(schema)
        text = kind == "string"
        opening = params.open.replace("{string}", "true" if text else "false")
        out: list[Element] = []
        before, _, after = opening.partition("{key}")
        out += self.lex.elements(before)
        if key_pattern is not None:
            out.append({"type": "regex", "pattern": key_pattern})
        else:
            out += self.lex.elements(key)
        for n, part in enumerate(after.split("{type}")):
            if n:
                out.append(self.type_text(kind, params))
            out += self.lex.elements(part)
        closing = self.lex.pieces(params.close)
        if text and isinstance(schema.get("enum"), list):
            out.append(_either([_element(str(v)) for v in schema["enum"]]))
            out += [_element(p) for p in closing]
        elif text:
            if isinstance(closing[0], int):
                value = self.free()
            else:
                value = {"type": "any_text", "excludes": [*self.all_texts, params.close]}
            out.append({"type": "tag", "begin": "", "content": value, "end": _edge(closing[0])})
            out += [_element(p) for p in closing[1:]]
        else:
            # The value's own close too: the parser reads a JSON value up to it, so a
            # string inside the value may not hold it (GLM's `</arg_value>` id).
            excludes = [*self.in_strings, params.close] if self.in_strings else []
            out.append(
                {
                    "type": "json_schema",
                    "json_schema": dict(schema) or True,
                    "excludes": excludes,
                }
            )
            out += [_element(p) for p in closing]
        out += self.lex.elements(params.after)
        return _sequence(out)


def build_format(
    fmt: Format,
    shape: Shape,
    specs: Sequence[ToolSpec],
    choice: str,
    *,
    parallel: bool,
    lex: Delimiters,
    in_reasoning: bool,
    exclude: bool,
) -> Element:
    """The structural tag's `format` object for one request. `exclude`: argument
    strings may not hold the call's delimiters."""
    builder = _Builder(fmt, shape, lex, parallel, exclude)
    suffix = builder.choice(choice, specs)
    elements = [builder.reasoning(in_reasoning)]
    if shape.content is not None and choice in ("auto", "none"):
        channel = _tag(lex, shape.content[0], [builder.free()], shape.content[1])
        elements.append({"type": "optional", "content": channel})
    elements = [e for e in elements if e is not None]
    if not elements:
        return suffix
    return {"type": "sequence", "elements": [*elements, suffix]}
