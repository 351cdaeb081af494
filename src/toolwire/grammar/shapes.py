"""What stands between a call's delimiters, per format: the only per-format grammar data.

Delimiters (call, section, reasoning, marks) come from the `Format` the parser runs;
a `Shape` adds what the grammar must write around the arguments, as text templates:

    call.open  head  ARGUMENTS  tail  call.close       (calls joined by `separator`)
    call.open  items[0] ITEM (separator ITEM)* items[1]  list_end     (a list of calls;
               ITEM = head ARGUMENTS tail)

`head` holds `{name}` (the tool's name) and may hold `{index}` (a call index, digits).
Any delimiter text inside a template (a mark such as `<｜tool▁sep｜>`) becomes the
delimiter's token when the tag is token-level. ARGUMENTS is written in XGrammar's
json_schema `style`; for tagged-parameter styles whose tags are tokens (GLM, DSML),
`params` describes each parameter so the grammar can name those tokens by id.

Adding a format is one entry here; the agreement tests (render -> accepted, grammar
walk -> parsed) fail for any entry that disagrees with the format's parser.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["SHAPES", "UNSUPPORTED", "Params", "Shape"]


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
    #: `open` may hold `{type}`: the schema's JSON type -> the text written for it (a
    #: type not listed: any of the listed non-string texts, the value being JSON).
    types: Mapping[str, str] | None = None


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
    #: literals (`anchored.pythonic_list`), and `head`/`tail` are unused.
    items: tuple[str, str] | None = None
    #: Written once after the list: its closing mark (`<|END_ACTION|>`), or "".
    list_end: str = ""
    #: (open, close) of the channel the format writes content in (Kimi K3's response
    #: channel), allowed once before the calls where text is (`auto`, `none`).
    content: tuple[str, str] | None = None
    #: The token written before every tag of the arguments (style "elements").
    namespace: str = ""


_HERMES = Shape(head='\n{"name": "{name}", "arguments": ', tail="}\n", name="json")
_QWEN_XML = Shape(head="\n<function={name}>", tail="</function>\n", style="qwen_xml")
_DSML = "｜DSML｜"
_DSML_SHAPE = Shape(
    head='{name}">\n',
    style="deepseek_xml",
    separator="\n",
    section_text=("\n", "\n"),
    params=Params(
        open=f'<{_DSML}parameter name="{{key}}" string="{{string}}">',
        close=f"</{_DSML}parameter>",
        after="\n",
    ),
)

_K3_TYPES = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
    "object": "object",
    "array": "array",
}

#: format name -> its shape.
SHAPES: dict[str, Shape] = {
    "hermes": _HERMES,
    "qwen3": _HERMES,
    "granite4": _HERMES,
    "qwen3_coder": _QWEN_XML,
    "seed_oss": _QWEN_XML,
    "deepseek_v3": Shape(head="function<｜tool▁sep｜>{name}\n```json\n", tail="\n```"),
    "deepseek_v31": Shape(head="{name}<｜tool▁sep｜>", separator=""),
    "deepseek_v32": _DSML_SHAPE,
    "deepseek_v4": _DSML_SHAPE,
    "kimi_k2": Shape(head="functions.{name}:{index}<|tool_call_argument_begin|>", separator=""),
    "glm45": Shape(
        head="{name}",
        tail="\n",
        style="glm_xml",
        params=Params(open="\n<arg_key>{key}</arg_key>\n<arg_value>", close="</arg_value>"),
    ),
    "glm47": Shape(
        head="{name}",
        style="glm_xml",
        separator="",
        params=Params(open="<arg_key>{key}</arg_key><arg_value>", close="</arg_value>"),
    ),
    # The call has no closing delimiter: its body ends itself at `</invoke>`.
    "minimax_m2": Shape(
        head='{name}">', tail="</invoke>", style="minimax_xml", section_text=("\n", "\n")
    ),
    # Arguments element by element at either level (`style` "params": no XGrammar
    # style writes them); `type` is K3's attribute (`formats.kimi_k3`).
    "kimi_k3": Shape(
        head=' tool="{name}" index="{index}"<|sep|>',
        style="params",
        separator="",
        params=Params(
            open='<|open|>argument key="{key}" type="{type}"<|sep|>',
            close="<|close|>argument<|sep|>",
            types=dict(_K3_TYPES),
        ),
        content=("<|open|>response<|sep|>", "<|close|>response<|sep|>"),
    ),
    # Parameters as nested elements, each tag after the namespace token
    # (`grammar.element_values`); the body ends itself with the namespaced `</invoke>`.
    "minimax_m3": Shape(
        head='{name}">\n',
        tail="]<]minimax[>[</invoke>",
        style="elements",
        section_text=("\n", "\n"),
        namespace="]<]minimax[>[",
    ),
    # JSON blocks; calls follow each other without the `<|message_model|>` the model
    # writes between blocks (a dropped special token to the parser).
    "inkling": Shape(
        head='{"name": "{name}", "args": ',
        tail="}",
        name="json",
        separator="",
        content=("<|content_text|>", "<|end_message|>"),
    ),
    # Token level: values are built element by element (`gemma_values`), so the
    # `<|"|>` quote is its id; text level: XGrammar's `gemma` style.
    "gemma4": Shape(head="call:{name}", style="gemma", separator="", sort_keys=True),
    # A pythonic list (`anchored.pythonic_list`) between the call tokens.
    "lfm2": Shape(
        head="", style="pythonic", items=("[", "]"), separator=", ", list_end="<|tool_call_end|>"
    ),
    # A JSON list of actions between the action tokens, one per line.
    "command": Shape(
        head='{"tool_call_id": "{index}", "tool_name": "{name}", "parameters": ',
        tail="}",
        name="json",
        items=("[\n    ", "\n]"),
        separator=",\n    ",
        list_end="<|END_ACTION|>",
    ),
    # A JSON list after the token; its `]` ends it.
    "granite": Shape(
        head='{"name": "{name}", "arguments": ',
        tail="}",
        name="json",
        items=("[", "]"),
        separator=", ",
    ),
    # A JSON list between the tool-calls tokens.
    "hunyuan": Shape(
        head='{"name": "{name}", "arguments": ',
        tail="}",
        name="json",
        items=("[", "]"),
        separator=", ",
        list_end="</tool_calls>",
    ),
    # v11+ calls; each call repeats `[TOOL_CALLS]` and its body ends itself.
    "mistral": Shape(head="{name}[ARGS]", separator=""),
}

#: format name -> why no structural tag is built for it.
#: (pythonic, llama3_json and gpt_oss have no shape: `anchored` and `harmony` build
#: their tags whole.)
UNSUPPORTED: dict[str, str] = {}
