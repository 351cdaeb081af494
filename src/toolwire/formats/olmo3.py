"""OLMo 3 (Ai2): Python calls, one a line, between `<function_calls>` tags.

Sample (vLLM 0.33's `olmo3` parser, `vllm/tool_parsers/olmo3_tool_parser.py:34-39`,
"newline-separated pythonic strings" with "argument values being null/true/false
instead of Pythonic literals", read between `<function_calls>` and `</function_calls>`
at :76-80 and joined into one list at :82-85)::

    <function_calls>get_weather(city="Paris", days=3)
    get_time(timezone=null, exact=true)</function_calls>

Each line is one call (`syntax.pythonic`, keyword arguments typed by the schema, with
JSON's `null`, `true` and `false` read as those values); a call is followed by the
next when the text after its `)` (and any whitespace) begins a name, and
`</function_calls>` ends the list (`syntax.end_marked`), as Llama 4's `<|python_end|>`.
The chat template is ChatML (`<|im_start|>`); OLMo 3 Instruct writes the calls, its
Think models are not trained to (no reasoning block here). No OLMo vocabulary is
available offline: where the tags are tokens of the served vocabulary the format is
gated, elsewhere it matches them as text and says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolwire.formats import register
from toolwire.formats.pythonic import literal
from toolwire.formats.spec import CallContext, Format, RenderedCall, Shape
from toolwire.syntax.end_marked import EndMarked
from toolwire.syntax.protocol import Reject
from toolwire.syntax.pythonic import PythonicCall

START, END = "<function_calls>", "</function_calls>"
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")


class Olmo3Call:
    """One call of the list (`PythonicCall`, JSON literals allowed), followed by the
    next when a name begins after it; a `[` or `]` around calls is not OLMo's."""

    def __init__(self, context: CallContext) -> None:
        self.name: str | None = None
        self.call_id: str | None = None
        self.done = False
        self.follows = False
        self._inner = PythonicCall(context, json_names=True)
        self._started = False
        self._error = ""

    def feed(self, text: str) -> int:
        if self.done:
            return 0
        i = 0
        if not self._started:
            i = len(text) - len(text.lstrip())
            if i == len(text):
                return i
            self._started = True
            if text[i] not in _NAME_START:
                self._error, self.done = "the call list holds no call", True
                return i
        used = i + self._inner.feed(text[i:])
        self.name = self._inner.name
        if self._inner.done:
            self.done = True
            if used and text[used - 1] == "]":
                self._error = "OLMo 3's calls are not written in a list"
            elif used < len(text) and text[used] in _NAME_START:
                self.follows = True
            else:
                self.follows = self._inner.follows
        return used

    def arguments(self) -> str:
        return self._inner.arguments()

    def close(self) -> None:
        if self._error:
            raise Reject(self._error)
        self._inner.close()


def _json_literal(value: object) -> str:
    """A JSON value as OLMo writes it: Python literal source, JSON's constant names."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {_json_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_json_literal(v) for v in value) + "]"
    return literal(value)


def render(calls: Sequence[RenderedCall]) -> str:
    lines = [
        f"{name}(" + ", ".join(f"{k}={_json_literal(v)}" for k, v in args.items()) + ")"
        for name, args in calls
    ]
    return START + "\n".join(lines) + END


def syntax(context: CallContext) -> EndMarked:
    return EndMarked(context, Olmo3Call, END)


OLMO3 = register(
    Format(
        name="olmo3",
        call=(START, None),
        syntax=syntax,
        render=render,
        marks=(END,),
        template_markers=("<|im_start|>",),
        grammar=Shape(
            head="",
            style="pythonic",
            items=("", ""),
            separator="\n",
            list_end=END,
            json_names=True,
        ),
    )
)
