"""What a format's grammar writes besides its delimiters: plain data on the `Format`.

The parser needs only the delimiters (`Format.call`, `section`, `marks`, ...); a grammar
must also write what stands around a call's arguments. `Format.grammar` holds that, as
one of three kinds (`toolwire.grammar` builds the tag from it; this module holds no
grammar code, so the formats import it freely):

* `Shape`: calls between the format's delimiters, as text templates::

      call.open  head  ARGUMENTS  tail  call.close       (calls joined by `separator`)
      call.open  items[0] ITEM (separator ITEM)* items[1]  list_end     (a list of calls;
                 ITEM = head ARGUMENTS tail)

* `AnchoredShape`: calls that no delimiter opens (the format's `anchor`): a list
  written only where a line begins (pythonic, Llama 3 JSON, Phi-4-mini);
* `HeaderShape`: messages routed by their header (harmony): the headers that make a
  message reasoning, content or a call.

Templates hold `{name}` (the tool's name) and may hold `{index}` (a call index,
digits). Any delimiter text inside a template (a mark such as `<｜tool▁sep｜>`) becomes
the delimiter's token when the tag is token-level. ARGUMENTS is written in XGrammar's
json_schema `style`; for tagged-parameter styles whose tags are tokens (GLM, DSML),
`params` describes each parameter so the grammar can name those tokens by id.

A format without `grammar` gets no structural tag (a reason says so). The agreement
tests (render -> accepted, grammar walk -> parsed) run on every format that has one,
a format registered at run time included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["AnchoredShape", "GrammarShape", "HeaderShape", "Params", "Shape"]


@dataclass(frozen=True)
class Params:
    """One tagged parameter: `open` VALUE `close` `after`.

    `open` holds `{key}` and may hold `{string}` ("true" for a text value, "false" for
    JSON, as DSML's attribute says) or `{type}` (Kimi K3's `type` attribute). Values
    typed `string` by the schema are raw text; every other value is JSON (the parser
    types values the same way).
    """

    open: str
    close: str
    after: str = ""
    #: `open` may hold `{type}`: (the schema's JSON type, the text written for it)
    #: pairs (a type not listed: any of the listed non-string texts, the value being
    #: JSON). Pairs, not a mapping: a `Format` is hashable.
    types: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class Shape:
    """The text a format writes around one call's arguments."""

    head: str
    tail: str = ""
    #: XGrammar json_schema style of the arguments.
    style: str = "json"
    #: "json": the name is written inside a JSON string (escaped); "raw": as is.
    name: Literal["json", "raw"] = "raw"
    #: Between consecutive calls.
    separator: str = "\n"
    #: Right after section.open and right before section.close.
    section_text: tuple[str, str] = ("", "")
    #: Tagged parameters written element by element (token-level tags only).
    params: Params | None = None
    #: The format writes object keys sorted (Gemma's template), not in schema order.
    sort_keys: bool = False
    #: The calls are the items of one list after call.open (LFM2, Command, Granite 3):
    #: the list's (opening, closing) text; items are `head ARGUMENTS tail`, joined by
    #: `separator`. Style "pythonic": the whole list is one EBNF grammar of Python
    #: literals (`grammar.anchored.pythonic_list`), and `head`/`tail` are unused.
    items: tuple[str, str] | None = None
    #: Written once after the list: its closing mark (`<|END_ACTION|>`), or "".
    list_end: str = ""
    #: Style "pythonic": values may also be JSON's `true`, `false` and `null`, as the
    #: family writes them in its calls (OLMo 3) and its parser reads them.
    json_names: bool = False
    #: (open, close) of the channel the format writes content in (Kimi K3's response
    #: channel), allowed once before the calls where text is (`auto`, `none`).
    content: tuple[str, str] | None = None
    #: The token written before every tag of the arguments (style "elements").
    namespace: str = ""
    #: Style "gemma": the delimiter around every string value (Gemma 4's `<|"|>`,
    #: FunctionGemma's `<escape>`), one of the format's marks.
    quote: str = '<|"|>'


@dataclass(frozen=True)
class AnchoredShape:
    """Calls that no delimiter opens: the text-gated parser starts one only where a
    line begins with a character of the format's `Anchor.begins`, so the grammar
    writes calls only there, and free text never holds such a character.

    style "pythonic": `[CALL, CALL, ...]`, keyword arguments as Python literals;
    style "json": `head ARGUMENTS tail`, calls joined by `separator` (inside `items`
    when given); style "params": the same with `params`' tagged parameters as the
    arguments.
    """

    style: Literal["pythonic", "json", "params"]
    head: str = ""
    tail: str = ""
    separator: str = ""
    #: style "json": the calls are the items of one list, (opening, closing) text
    #: (Phi-4-mini's `functools[` and `]`).
    items: tuple[str, str] | None = None
    #: style "params": `head ARGUMENTS tail`, the arguments as tagged parameters,
    #: text level (MiniCPM's `<param name="{key}">`...`</param>`).
    params: Params | None = None


@dataclass(frozen=True)
class HeaderShape:
    """Messages routed by their header (harmony's channels and recipients): the headers
    the grammar writes, each a template read by the format's `Header.route`.

    A header may be preceded by `start` (the renderer writes it before each message);
    the `calls_after_start` headers only after it. A call's body is JSON arguments
    ending with the format's call close.
    """

    #: Written before a header, optionally (`<|start|>assistant`).
    start: str
    #: A reasoning message: (header, end).
    reasoning: tuple[str, str]
    #: A content message: (header, its ends); the output may also end inside it.
    content: tuple[str, tuple[str, ...]]
    #: The headers of a call to `{name}`, bare or after `start`.
    calls: tuple[str, ...]
    #: The headers of a call to `{name}` written only after `start` (recipient first).
    calls_after_start: tuple[str, ...] = ()


#: What `Format.grammar` holds.
GrammarShape = Shape | AnchoredShape | HeaderShape
