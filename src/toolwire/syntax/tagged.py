"""A call body of tagged parameters whose values are text, converted to JSON.

    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>

That is Qwen3-Coder; GLM, MiniMax and DeepSeek's DSML differ only in their tags, so
one parser takes the tags as data (`Tags`). Values are typed by the declared schema
(`values.as_json`). A string value streams as it arrives, escaped fragment by
fragment; other values are converted once their closing tag is seen. So is a string
the schema limits to an `enum`: the grammars write such a value as whitespace, one of
the strings, whitespace (XGrammar's XML styles), so a value that is not one of them but
is one once its surrounding whitespace is stripped is read stripped. Output is
append-only: nothing emitted is ever taken back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from functools import lru_cache

from toolwire.holdback import Holdback
from toolwire.syntax.base import WS, ArgumentsDrain
from toolwire.syntax.protocol import CallContext, Reject
from toolwire.syntax.values import as_json, quote_fragment

__all__ = ["TaggedParams", "Tags"]


@dataclass(frozen=True)
class Tags:
    """The text around each part of a tagged call body (structural forms)."""

    #: Around the tool's name. A close of "" means the name runs until the first
    #: parameter's key tag or the end of the body.
    name: tuple[str, str]
    #: Around a parameter's name.
    key: tuple[str, str]
    #: Around a parameter's value ("" for no opening tag).
    value: tuple[str, str]
    #: What ends the body ("" when only the call's closing delimiter does).
    end: str
    #: Strip one newline at each end of a value (the templates write them).
    trim_newline: bool = True
    #: Splits the key tag's text into (key, JSON type override or None).
    attributes: Callable[[str], tuple[str, str | None]] | None = None
    #: Reads the tool's name out of the name tag's text, when the tag holds more than
    #: the name (Kimi K3's `tool="NAME" index="N"`); "" when it names no tool.
    head: Callable[[str], str] | None = None

    def resolve(self, marks: Mapping[str, str]) -> Tags:
        """These tags with each mark's text replaced by its structural form
        (`CallContext.marks`), for tags that hold a token (GLM's, DSML's)."""

        def form(tag: str) -> str:
            for text, structural in marks.items():
                tag = tag.replace(text, structural)
            return tag

        return replace(
            self,
            name=(form(self.name[0]), form(self.name[1])),
            key=(form(self.key[0]), form(self.key[1])),
            value=(form(self.value[0]), form(self.value[1])),
            end=form(self.end),
        )


class _Phase(Enum):
    NAME_OPEN = 0
    NAME = 1
    PARAMS = 2
    KEY = 3
    VALUE_OPEN = 4
    VALUE = 5
    END = 6


@lru_cache(maxsize=64)
def _closing(tag: str) -> Holdback:
    """The holdback of a value's closing tag, built once per tag (a `Holdback` never
    changes, and every call body of a format asks for the same one)."""
    return Holdback([tag])


class TaggedParams(ArgumentsDrain):
    """Parses one tagged call body incrementally into a name and JSON arguments."""

    def __init__(self, context: CallContext, tags: Tags, *, self_ending: bool = False) -> None:
        super().__init__()
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self._self_ending = self_ending  # the body ends at `tags.end` (no close delimiter)
        self._tools = context.tools
        self._tags = tags
        self._value_close = _closing(tags.value[1])  # a value's tail that may begin its end
        self._phase = _Phase.NAME_OPEN
        self._buf = ""
        self._key = ""
        self._kind: str | None = None
        self._nullable = False  # the schema allows null: a string value is held whole
        self._enum: tuple[str, ...] | None = None  # the schema's strings: held whole too
        self._value: list[str] = []  # buffered raw value (non-string kinds)
        self._started = False  # the current string value emitted its first char
        self._count = 0
        self._error = ""
        #: `plain`'s conditions on the state held, checked at its first step after a
        #: `feed` (only `feed` changes them: a plain step leaves them as they are).
        self._ready = False

    # -- CallSyntax ------------------------------------------------------------------

    def feed(self, text: str) -> int:
        self._ready = False
        if self.done:
            return 0
        if self._error:
            return len(text)
        self._buf += text
        if self._phase is _Phase.VALUE:  # inside a value: its scan, not the phase loop
            if not self._value_text():
                return len(text)
            self._phase = _Phase.PARAMS
        self._advance()
        if self.done:  # what follows the end tag is the parser's again (all of this feed)
            rest, self._buf = len(self._buf), ""
            return len(text) - rest
        return len(text)

    def plain(self, text: str) -> str | None:
        """`PlainStep`: more of a string value already begun, holding nothing that
        could begin its closing tag; None for anything else. A newline it ends with
        may be the one the value ends with: it is held, as `_value_text` holds it
        (the only text held at a plain step), and goes out before the next one's."""
        tags = self._tags
        if tags.value[1][0] in text:
            return None
        if not self._ready:
            if (
                self._phase is not _Phase.VALUE
                or (self._buf and (self._buf != "\n" or not tags.trim_newline))
                or self._out
                or self._error
                or self.done
                or not self._started
                or self._kind != "string"
                or self._nullable
                or self._enum is not None
            ):
                return None
            self._ready = True
        if tags.trim_newline:
            held = self._buf
            if text[-1:] == "\n":
                self._buf, text = "\n", held + text[:-1]
                if not text:
                    return ""
            elif held:
                self._buf, text = "", held + text
        return _quoted(text) if len(text) <= _QUOTED_TEXT else quote_fragment(text)

    def close(self) -> None:
        self._ready = False
        if self._error:
            raise Reject(self._error)
        tags = self._tags
        if self._phase is _Phase.NAME and not tags.name[1]:
            self._set_name(self._buf)
            self._buf = ""
            self._phase = _Phase.PARAMS
        if self._phase is _Phase.PARAMS and not self._buf.strip(WS):
            self._phase = _Phase.END
            self._out.append("}")
        if self._phase is not _Phase.END:
            raise Reject("the call's parameters are incomplete")
        if self._buf.strip(WS):
            raise Reject("text after the call's parameters")
        if self.name is None:
            raise Reject("the call names no tool")

    # -- the machine -----------------------------------------------------------------

    def _advance(self) -> None:
        tags = self._tags
        while not self._error:
            buf = self._buf
            phase = self._phase
            if phase in (_Phase.NAME_OPEN, _Phase.PARAMS, _Phase.VALUE_OPEN, _Phase.END):
                stripped = buf.lstrip(WS)
                if not stripped:
                    self._buf = ""
                    return
                buf = self._buf = stripped
            if phase is _Phase.NAME_OPEN:
                if not self._expect(tags.name[0]):
                    return
                self._phase = _Phase.NAME
            elif phase is _Phase.NAME:
                if not tags.name[1]:
                    at = buf.find(tags.key[0])
                    if at < 0:
                        return
                    self._set_name(buf[:at])
                    self._buf = buf[at:]
                else:
                    at = buf.find(tags.name[1])
                    if at < 0:
                        return
                    self._set_name(buf[:at])
                    self._buf = buf[at + len(tags.name[1]) :]
                if self._error:
                    return
                self._phase = _Phase.PARAMS
            elif phase is _Phase.PARAMS:
                if tags.end and buf.startswith(tags.end):
                    self._buf = buf[len(tags.end) :]
                    self._phase = _Phase.END
                    self._out.append("}")
                    self.done = self._self_ending
                    if self.done:
                        return
                    continue
                if tags.end and tags.end.startswith(buf):
                    return
                if not self._expect(tags.key[0]):
                    return
                self._phase = _Phase.KEY
            elif phase is _Phase.KEY:
                at = buf.find(tags.key[1])
                if at < 0:
                    return
                self._start_value(buf[:at])
                self._buf = buf[at + len(tags.key[1]) :]
                self._phase = _Phase.VALUE_OPEN if tags.value[0] else _Phase.VALUE
            elif phase is _Phase.VALUE_OPEN:
                if not self._expect(tags.value[0]):
                    return
                self._phase = _Phase.VALUE
            elif phase is _Phase.VALUE:
                if not self._value_text():
                    return
                self._phase = _Phase.PARAMS
            else:  # END
                self._error = "text after the call's parameters"
                return

    def _expect(self, tag: str) -> bool:
        """Consume `tag` at the start of the buffer; False to wait for more text."""
        buf = self._buf
        if buf.startswith(tag):
            self._buf = buf[len(tag) :]
            return True
        if not tag.startswith(buf):
            self._error = f"expected {tag!r} in the call body"
        return False

    def _set_name(self, text: str) -> None:
        if self._tags.head is not None:
            text = self._tags.head(text)
        name = text.strip(WS)
        if not name:
            self._error = "the call names no tool"
            return
        self.name = name
        self._out.append("{")

    def _start_value(self, key_text: str) -> None:
        key, kind = key_text.strip(WS), None
        if self._tags.attributes is not None:
            key, kind = self._tags.attributes(key_text)
        if not key:
            self._error = "a parameter has no name"
            return
        nullable, enum = False, None
        if self.name is not None:
            nullable = self._tools.parameter_nullable(self.name, key)
            if kind is None:
                kind = self._tools.parameter_type(self.name, key)
            if kind == "string":
                enum = self._tools.parameter_enum(self.name, key)
        self._key, self._kind, self._nullable, self._enum = key, kind, nullable, enum
        self._value, self._started = [], False
        self._out.append((", " if self._count else "") + quote_fragment_key(key))
        self._count += 1
        if kind == "string" and not nullable and enum is None:
            self._out.append('"')

    def _value_text(self) -> bool:
        """Consume value text; True once the value's closing tag was seen."""
        close = self._tags.value[1]
        buf = self._buf
        at = buf.find(close)
        if at >= 0:
            text, self._buf = buf[:at], buf[at + len(close) :]
            self._value_piece(text, final=True)
            return True
        # Hold back what could begin the closing tag (and a newline before it).
        keep = self._value_close.tail(buf)
        if self._tags.trim_newline and buf[: len(buf) - keep].endswith("\n"):
            keep += 1
        if not self._started and self._tags.trim_newline and len(buf) - keep < 2:
            keep = len(buf)  # cannot yet tell whether the value opens with a newline
        if keep < len(buf):
            self._value_piece(buf[: len(buf) - keep], final=False)
            self._buf = buf[len(buf) - keep :]
        return False

    def _value_piece(self, text: str, *, final: bool) -> None:
        trim = self._tags.trim_newline
        if not self._started:
            if trim and text.startswith("\n"):
                text = text[1:]
            self._started = True
        if final and trim and text.endswith("\n"):
            text = text[:-1]
        if self._kind == "string" and not self._nullable and self._enum is None:
            if text:
                self._out.append(quote_fragment(text))
            if final:
                self._out.append('"')
            return
        self._value.append(text)
        if final:
            raw = "".join(self._value)
            enum = self._enum
            if enum is not None and raw not in enum and raw.strip(WS) in enum:
                raw = raw.strip(WS)
            self._out.append(as_json(raw, self._kind, self._nullable))


#: `quote_fragment` of a plain step's text when it is short (one id's or a few): a
#: cache bounded in entries and in their length answers most steps of a long value
#: for a dict lookup; a long delta's text is quoted as it is, not kept.
_quoted = lru_cache(maxsize=1 << 14)(quote_fragment)
_QUOTED_TEXT = 64


def quote_fragment_key(key: str) -> str:
    return '"' + quote_fragment(key) + '": '
