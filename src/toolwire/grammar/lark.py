"""The same language for llguidance: a structural tag's elements as a Lark grammar.

Data flow::

    the tag as structural elements (`api.build_tag`, before rules are shared)
        --to_lark()--> Lark text (llguidance's dialect), one rule per composite element,
                       equal rules once (memoized by their text)

Element by element::

    const_string "s"          "s"                       token N        <[N]>
    regex P                   /P/                       sequence       a b c
    or                        a | b                     optional/star/plus   (a)? (a)* (a)+
    any_tokens (exclude X)    TEXT (S TEXT)*: text, and   any_text (exclude X)   a terminal:
                              S the special tokens not    text holding no X (`&`, `~`)
                              in X (nor stop ids)
    tag B C E                 B C E; C any_tokens/any_text ends at the first E, as
                              XGrammar's tag does (E left out of C)
    token_triggered_tags      FREE (TAG FREE)*  |  FREE TAG?  (stop_after_first) ...
    tags_with_separator       TAG (SEP TAG)* ... (at_least_one, stop_after_first)
    json_schema, style json   %json {schema, additionalProperties false where
                              properties are declared (XGrammar's strict default),
                              whitespace bounded as the shared XGrammar tag bounds it}
    json_schema, qwen_xml /   the parameters as XGrammar writes them: WS <parameter=K>
      minimax_xml             text up to </parameter> (strings) or WS JSON WS (others)

Special tokens: llguidance's lexemes are bytes and special tokens are not (every added
token of a Hugging Face vocabulary is special to it), so no delimiter id can stand
inside a JSON string or a text value by construction: a json_schema's `excludes`
(delimiter text) is dropped at token level, and free text (XGrammar's `any_tokens`
without the delimiter ids) is text between the other special tokens. The languages
differ in two ways, both at token level: the spelled text of a delimiter (text to a
gated parser) may stand in a JSON string where XGrammar's tag forbids it, and no
special token stands in a JSON string, where XGrammar's allows those that are not
the excluded delimiters. Free text is not written as a token range (`<[^ids]>*`):
llguidance reads a token such a range allows as that range even where the grammar
goes on with the token's text (DSML's `<` before its `｜DSML｜` id), and a token
cannot straddle a literal and a range (`>a` after `<query`).

What this cannot express raises `LarkUnsupported` with the reason: `excludes` on a
JSON value at text level (llguidance's JSON strings cannot exclude text), text-level
triggers, a grammar element (pythonic's Python literals are an XGrammar EBNF), and the
XML styles other than qwen_xml / minimax_xml. Pure: no llguidance import here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from toolwire.grammar.whitespace import whitespace_regex

__all__ = ["LarkUnsupported", "to_lark"]

Element = Mapping[str, Any]

#: Regex metacharacters of Rust's `regex` crate (and `/`, which ends a Lark regex).
_META = re.compile(r"([\\.+*?()|\[\]{}^$#&\-~/])")
_ANY = "(?s:.*)"
_ANY_BODY = f"/{_ANY}/"
#: XGrammar's XML parameter styles: (the opening text before the key, after it).
_XML_STYLES = {"qwen_xml": ("<parameter=", ">"), "minimax_xml": ('<parameter name="', '">')}
_XML_CLOSE = "</parameter>"
_XML_WS = "/[ \\n\\r\\t]*/"
_XML_NAME = "/[a-zA-Z_][a-zA-Z0-9_]*/"


class LarkUnsupported(Exception):
    """The tag holds something this translation cannot write as Lark (the reason)."""


def to_lark(tag: Element, *, token_level: bool, specials: Mapping[int, str] | None = None) -> str:
    """`tag` (`{"type": "structural_tag", "format": ...}` of structural elements) as a
    Lark grammar of the same language (see the module doc). `specials`: the ids
    llguidance reads as special tokens (the vocabulary's added tokens), stop ids left
    out, with their text: free text may hold those the tag does not exclude."""
    if tag.get("type") != "structural_tag" or "format" not in tag:
        raise LarkUnsupported("not a structural tag of elements")
    writer = _Writer(token_level, dict(specials or {}))
    root = writer.element(tag["format"])
    return "\n".join([f"start: {root}", *writer.lines]) + "\n"


def _leading_text(e: Element) -> str | None:
    """The text an element must begin with, when it begins with text (or may be empty
    and then nothing is written), else None."""
    kind = e.get("type")
    if kind == "const_string":
        return str(e["value"]) or None
    if kind == "tag":
        begin = e["begin"]
        return begin if isinstance(begin, str) and begin else None
    if kind == "sequence" and e["elements"]:
        return _leading_text(e["elements"][0])
    if kind in ("star", "plus", "optional"):
        return _leading_text(e["content"])
    return None


def _not_starting(text: str) -> str:
    """A regex of the strings without `<` that do not begin with `text` (no `<` in it)."""
    first = _META.sub(r"\\\1", text[0])
    other = f"[^<{first}][^<]*"
    if len(text) == 1:
        return f"(?:{other})?"
    return f"(?:{other}|{_escape(text[0])}{_not_starting(text[1:])})?"


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _escape(text: str) -> str:
    return _META.sub(r"\\\1", text).replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


class _Writer:
    def __init__(self, token_level: bool, specials: dict[int, str]) -> None:
        self.token_level = token_level
        self.specials = frozenset(specials)
        #: Texts no text lexeme can write as their token: a delimiter holding one needs
        #: no exclusion from text at token level (spelled, it is text to the parser).
        self.special_texts = [t for t in specials.values() if t]
        self.lines: list[str] = []
        self._names: dict[str, str] = {}

    # -- rules and terminals, each once ------------------------------------------------

    def rule(self, body: str) -> str:
        """A rule named for `body` (equal bodies share one rule)."""
        return self._named(body, "r", ": ")

    def terminal(self, body: str) -> str:
        """A terminal (one lexeme) named for `body`."""
        return self._named(body, "T", ": ")

    def ended(self, text: str, end: str) -> str:
        """`text` (a terminal body that holds no `end`) then `end`, as one lazy lexeme:
        it ends at the first `end`. Lazy, not greedy: a greedy lexer cannot prove that
        such a lexeme has ended (the negation's derivative), and llguidance then fails
        on the special token that follows (`has_pending_lexeme_bytes`)."""
        return self._named(self.terminal(f"({text}) {_literal(end)}"), "t", "[lazy]: ")

    def _named(self, body: str, prefix: str, colon: str) -> str:
        key = prefix + body
        name = self._names.get(key)
        if name is None:
            name = f"{prefix}{len(self._names)}"
            self._names[key] = name
            self.lines.append(f"{name}{colon}{body}")
        return name

    # -- elements ----------------------------------------------------------------------

    def element(self, e: Element) -> str:
        kind = e.get("type")
        write: Callable[[Element], str] | None = getattr(self, f"_{kind}", None)
        if write is None:
            raise LarkUnsupported(f"element type {kind!r}")
        return write(e)

    def _edge(self, edge: Any) -> str:
        """A tag's begin or end: a string, a token element, or a list of strings."""
        if isinstance(edge, str):
            return _literal(edge) if edge else ""
        if isinstance(edge, list):
            return self.rule(" | ".join(self._edge(x) or '""' for x in edge))
        return self.element(edge)

    def _const_string(self, e: Element) -> str:
        return _literal(e["value"]) if e["value"] else '""'

    def _token(self, e: Element) -> str:
        token = e["token"]
        if not isinstance(token, int):
            raise LarkUnsupported("a token named by its text")
        return f"<[{token}]>"

    def _regex(self, e: Element) -> str:
        pattern = str(e["pattern"]).replace("/", "\\/")
        return self.terminal(f"/{pattern}/")

    def _sequence(self, e: Element) -> str:
        elements = list(e["elements"])
        parts = []
        for n, x in enumerate(elements):
            after = _leading_text(elements[n + 1]) if n + 1 < len(elements) else None
            if x.get("type") == "any_tokens" and after:
                parts.append(self._any_tokens(x, before=after[0]))
            else:
                parts.append(self.element(x))
        parts = [p for p in parts if p]
        return self.rule(" ".join(parts)) if parts else '""'

    def _or(self, e: Element) -> str:
        return self.rule(" | ".join(self.element(x) or '""' for x in e["elements"]))

    def _optional(self, e: Element) -> str:
        return self.rule(f"({self.element(e['content'])})?")

    def _star(self, e: Element) -> str:
        return self.rule(f"({self.element(e['content'])})*")

    def _plus(self, e: Element) -> str:
        return self.rule(f"({self.element(e['content'])})+")

    def _repeat(self, e: Element) -> str:
        high = "" if e["max"] == -1 else str(e["max"])
        return self.rule(f"({self.element(e['content'])}){{{e['min']},{high}}}")

    def _any_tokens(self, e: Element, also: Iterable[Any] = (), before: str | None = None) -> str:
        """Free text. `before`: the character the text that follows begins with (DSML's
        `<` before its token): the text is then cut at each such character, a lexeme
        of its own, so the lexer never holds it pending where the token may follow."""
        text = self.terminal(_ANY_BODY)
        if before:
            rest = self.terminal(f"/[^{_escape(before)}]*/")
            text = self.rule(f"{rest} ({_literal(before)} {rest})*")
        return self.free(text, [*e.get("exclude_tokens", ()), *also])

    def free(self, text: str, excluded: Iterable[Any]) -> str:
        """`text` (a terminal) alternating with the special tokens not `excluded`."""
        allowed = self.allowed(excluded)
        return self.rule(f"{text} ({allowed} {text})*") if allowed else text

    def allowed(self, excluded: Iterable[Any]) -> str:
        """The special tokens not `excluded`, as one token range ("" when none)."""
        excluded = list(excluded)
        if any(not isinstance(i, int) for i in excluded):
            raise LarkUnsupported("a token named by its text")
        ids = sorted(self.specials - set(excluded))
        return f"<[{','.join(map(str, ids))}]>" if ids else ""

    def _text(self, excludes: Iterable[str]) -> str:
        """Text (valid UTF-8) holding none of `excludes`, as a terminal body."""
        words = self._words(excludes)
        if not words:
            return _ANY_BODY
        avoided = "|".join(_escape(w) for w in words)
        return f"/{_ANY}/ & ~/{_ANY}(?:{avoided}){_ANY}/"

    def _words(self, excludes: Iterable[str]) -> list[str]:
        """The exclusions text must honour. At token level one holding a special token's
        text is dropped (its id cannot stand in text; its spelled text is text to a gated
        parser): each exclusion costs the lexer states."""
        words = [w for w in dict.fromkeys(excludes) if w]
        if self.token_level:
            words = [w for w in words if not any(t in w for t in self.special_texts)]
        return words

    def until(self, excludes: Iterable[str], end: str) -> str:
        """Text holding none of `excludes` up to the first `end`, and `end`. An end that
        begins with `<` and holds no other (`</parameter>`, DSML's `</`), with nothing
        else excluded, is written without negation: runs of text cut at each `<`, each
        `<` followed by text that does not go on as the end, or by the rest of the end.
        Its token masks cost a tenth of the negation's (llguidance follows the negation
        through its derivatives for every token)."""
        words = self._words([*excludes, end])
        rest = end[1:]
        if words != [end] or not end.startswith("<") or not rest or "<" in rest:
            return self.ended(self._text(words), end)
        run = self.terminal("/[^<]*/")
        tail = self.terminal(f"/{_not_starting(rest)}/")
        return self.rule(f'{run} ("<" {tail})* "<" {_literal(rest)}')

    def _any_text(self, e: Element) -> str:
        return self.terminal(self._text(e.get("excludes", ())))

    def _tag(self, e: Element) -> str:
        begin, content, end = e["begin"], e["content"], e["end"]
        head = self._edge(begin)
        kind = content.get("type")
        if kind == "any_text" and isinstance(end, str):
            # Text up to the first `end`, as one lexeme (it can hold no `end`).
            excludes = content.get("excludes", ())
            inner = self.until(excludes, end) if end else self.terminal(self._text(excludes))
            return self.rule(" ".join(p for p in (head, inner) if p))
        if kind == "any_tokens" and isinstance(end, str) and end:
            # Text (and special tokens) up to the first `end`, which text ends.
            text = self._text([end])
            last = self.until((), end)
            allowed = self.allowed(content.get("exclude_tokens", ()))
            if allowed:
                last = self.rule(f"({self.terminal(text)} {allowed})* {last}")
            return self.rule(" ".join(p for p in (head, last) if p))
        if kind == "any_tokens":  # ended by a token (never text) or by nothing
            also = [end["token"]] if isinstance(end, Mapping) and end.get("type") == "token" else []
            parts = [head, self._any_tokens(content, also), self._edge(end)]
            return self.rule(" ".join(p for p in parts if p))
        if kind == "any_text":
            raise LarkUnsupported("text that a token or several ends close")
        parts = [head, self.element(content), self._edge(end)]
        return self.rule(" ".join(p for p in parts if p) or '""')

    def _triggered_tags(self, e: Element) -> str:
        raise LarkUnsupported("text-level triggers (free text dispatching on a string)")

    def _token_triggered_tags(self, e: Element) -> str:
        free = self._any_tokens(e, e["trigger_tokens"])
        tag = self.rule(" | ".join(self.element(t) for t in e["tags"]))
        first, more = e.get("stop_after_first", False), e.get("at_least_one", False)
        if more:
            return tag if first else self.rule(f"({tag})+")
        if first:
            return self.rule(f"{free} ({tag})?")
        return self.rule(f"{free} ({tag} {free})*")

    def _tags_with_separator(self, e: Element) -> str:
        tag = self.rule(" | ".join(self.element(t) for t in e["tags"]))
        first, more = e.get("stop_after_first", False), e.get("at_least_one", False)
        if first:
            return tag if more else self.rule(f"({tag})?")
        separator = _literal(e["separator"]) if e["separator"] else ""
        many = self.rule(f"{tag} ({separator} {tag})*".replace("( ", "("))
        return many if more else self.rule(f"({many})?")

    def _grammar(self, e: Element) -> str:
        raise LarkUnsupported("an EBNF grammar element (Python-literal arguments)")

    # -- JSON values ---------------------------------------------------------------------

    def _json_schema(self, e: Element) -> str:
        if e.get("excludes") and not self.token_level:
            raise LarkUnsupported("a JSON value that excludes text (llguidance's JSON cannot)")
        style = e.get("style", "json")
        schema = e["json_schema"]
        schema = {} if schema is True else dict(schema)
        whitespace = e.get("max_whitespace_cnt")
        if style == "json":
            return self.json(schema, whitespace)
        if style in _XML_STYLES:
            return self.xml_object(schema, _XML_STYLES[style])
        raise LarkUnsupported(f"the {style!r} argument style")

    def json(self, schema: Mapping[str, Any], whitespace: int | None) -> str:
        options: dict[str, Any] = {"lenient": True}
        if whitespace is not None:
            options["whitespace_pattern"] = whitespace_regex(whitespace)
        body = {**_strict(schema), "x-guidance": options}
        return self.rule("%json " + json.dumps(body, ensure_ascii=False))  # key order is meaning

    def xml_object(self, schema: Mapping[str, Any], style: tuple[str, str]) -> str:
        """XGrammar's qwen_xml / minimax_xml parameters: declared ones in order
        (required present, others optional), or any names when none are declared."""
        opening, after = style
        ws = self.terminal(_XML_WS)
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            name = self.terminal(_XML_NAME)
            value = self.rule(
                " | ".join(
                    [
                        self.xml_text(),
                        self.json({"type": "array"}, None),
                        self.json({"type": "object"}, None),
                    ]
                )
            )
            head = f"{_literal(opening)} {name} {_literal(after)}"
            one = self.rule(f"{ws} {head} {ws} {value} {ws} {_literal(_XML_CLOSE)}")
            return self.rule(f"({one})* {ws}")
        required = set(schema.get("required") or ())
        parts = []
        for key, sub in props.items():
            one = self.xml_param(
                str(key), sub if isinstance(sub, Mapping) else {}, opening, after, ws
            )
            parts.append(one if key in required else self.rule(f"({one})?"))
        return self.rule(" ".join([*parts, ws]))

    def xml_param(
        self, key: str, schema: Mapping[str, Any], opening: str, after: str, ws: str
    ) -> str:
        head = _literal(f"{opening}{key}{after}")
        close = _literal(_XML_CLOSE)
        if schema.get("type") == "string":
            enum = schema.get("enum")
            if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
                value = self.rule(" | ".join(_literal(v) for v in enum))
                return self.rule(f"{ws} {head} {ws} {value} {ws} {close}")
            pattern = schema.get("pattern")
            if isinstance(pattern, str):
                value = self.terminal(
                    "/" + pattern.removeprefix("^").removesuffix("$").replace("/", "\\/") + "/"
                )
                return self.rule(f"{ws} {head} {ws} {value} {ws} {close}")
            low, high = schema.get("minLength"), schema.get("maxLength")
            if isinstance(low, int) or isinstance(high, int):
                span = (
                    f"{low if isinstance(low, int) else 0},{high if isinstance(high, int) else ''}"
                )
                value = self.terminal(f"/(?s:.){{{span}}}/")
                return self.rule(f"{ws} {head} {ws} {value} {ws} {close}")
            return self.rule(f"{ws} {head} {self.xml_text()}")
        value = self.json(schema, None)
        return self.rule(f"{ws} {head} {ws} {value} {ws} {close}")

    def xml_text(self) -> str:
        """A text value and its `</parameter>`, as one lexeme (XGrammar's xml_string)."""
        return self.until((), _XML_CLOSE)


#: Keywords whose value is a schema, a list of schemas, or a name -> schema map.
_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "$defs", "definitions")


def _strict(schema: Any) -> Any:
    """`schema` with `additionalProperties: false` wherever properties are declared and
    it says nothing: XGrammar's JSON schema conversion (strict by default) allows no
    other keys there, so neither does the Lark form."""
    if not isinstance(schema, Mapping):
        return schema
    out = dict(schema)
    for key in _ONE:
        if isinstance(out.get(key), Mapping):
            out[key] = _strict(out[key])
    for key in _MANY:
        if isinstance(out.get(key), list):
            out[key] = [_strict(s) for s in out[key]]
    for key in _NAMED:
        if isinstance(out.get(key), Mapping):
            out[key] = {name: _strict(s) for name, s in out[key].items()}
    if isinstance(schema.get("properties"), Mapping):
        out.setdefault("additionalProperties", False)
    return out
