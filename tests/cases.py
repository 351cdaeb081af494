"""The per-format table every invariant test runs over.

Each registered format must have an entry in `TOKENIZERS` (the tokenizer it is tested
with); a format without one fails the suite, so no format can skip the invariants.
Without the shared data (`tests/data.py`) the invariant suite tests every format on the
synthetic vocabulary instead (`standalone_tokenizer`, `tests/vocabulary.py`); a format
whose tokenizer needs an extra that is not installed (mistral-common) is skipped, the
reason naming the extra.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tests.data import has_data, mistral_tokenizer, tokenizer_for
from tests.derived import derived_tokenizer
from tests.vocabulary import synthetic_tokenizer
from toolwire import Message, Parser, Tokenizer
from toolwire.events import Event, merge

#: format name -> the vocabulary its tests use (real where one exists offline): a folder
#: under the shared data's tokenizers/, `derived:FAMILY` (tests/derived.py) or
#: `mistral:FILE` (through mistral-common). Formats that name the same one share it.
TOKENIZERS: dict[str, str] = {
    "hermes": "qwen3",
    "qwen3": "qwen3",
    "qwen3_coder": "qwen3",
    # DeepSeek: real vocabularies. The original V3 one has the tool tokens but no
    # `<think>` (matched as text there); V4's has `<think>` and `｜DSML｜`.
    "deepseek_v3": "deepseek_v3",
    "deepseek_v31": "deepseek_v3",
    "deepseek_v32": "deepseek_v4",
    "deepseek_v4": "deepseek_v4",
    "deepseek_v41": "deepseek_v4",
    # DERIVED tokenizers (tests/derived.py): Qwen3's vocabulary plus the family's
    # delimiters as added tokens; no real vocabulary exists offline for these.
    "kimi_k2": "derived:kimi_k2",
    "glm45": "derived:glm",
    "glm47": "derived:glm",
    "minimax_m2": "derived:minimax_m2",
    "gemma4": "derived:gemma4",
    # Granite 4.0's added tokens (its tokenizer.json, `"special": false` kept where it
    # says so) on Qwen3's vocabulary: no Granite vocabulary is available offline.
    "granite4": "derived:granite4",
    "seed_oss": "derived:seed_oss",
    "lfm2": "derived:lfm2",
    "command": "derived:command",
    "granite": "derived:granite",
    # Granite 3.1's `<tool_call>` is text in Granite 3's vocabulary (not a token).
    "granite31": "derived:granite",
    "hunyuan": "derived:hunyuan",
    "hy_v3": "derived:hy_v3",
    "hy_v4": "derived:hy_v4",
    # Kimi K3 and Inkling: no vocabulary is published offline or on PyPI either.
    "kimi_k3": "derived:kimi_k3",
    "inkling": "derived:inkling",
    "llama4": "derived:llama4",
    "nemotron": "derived:nemotron",
    "ernie45": "derived:ernie45",
    "olmo3": "derived:olmo3",
    "functiongemma": "derived:functiongemma",
    "apertus": "derived:apertus",
    "jamba": "derived:jamba",
    "gigachat3": "derived:gigachat3",
    "gigachat31": "derived:gigachat3",
    "gigachat35": "derived:gigachat35",
    "internlm": "derived:internlm",
    "step3": "derived:step3",
    "longcat": "derived:longcat",
    "minimax_m3": "derived:minimax_m3",
    # Real vocabularies: o200k_harmony; Llama 3 (JSON and pythonic calls are text-gated:
    # no call delimiter is a token); Mistral's tekken through mistral-common.
    "gpt_oss": "gpt_oss",
    "llama3_json": "llama3",
    "pythonic": "llama3",
    # Phi-4-mini's `functools` is text in any vocabulary (no Phi vocabulary offline).
    "phi4_mini": "llama3",
    # MiniCPM's `<function name=` tags are text in any vocabulary (none offline).
    "minicpm5": "derived:minicpm5",
    # xLAM-2-8b-fc-r is a Llama 3.1 model: its bare JSON lists are text there.
    "xlam": "llama3",
    "mistral": "mistral:tekken_240718.json.gz",
}

#: Formats expected to be text-matched (Parser.gated False) with their test tokenizer
#: (real or synthetic: no delimiter opens their calls).
UNGATED: set[str] = {"llama3_json", "pythonic", "phi4_mini", "granite31", "minicpm5", "xlam"}

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "unit": {"type": "string", "enum": ["c", "f"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer"},
                    "exact": {"type": "boolean"},
                    "filters": {"type": "object"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]

#: Calls whose arguments exercise every JSON type, markup-like text and non-ASCII.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_weather", {"city": "Paris", "days": 3}),
    ("search", {"query": 'a "quoted" <b>x</b> {[ 日本 \\ end', "limit": 10}),
    ("search", {"query": "42", "exact": True, "filters": {"a": [1, 2.5, None]}, "tags": ["x"]}),
    ("get_time", {}),
]

REASONING = "The user wants the weather.\nI will call a tool."
CONTENT = "Let me check that for you, café ☕."


def tokenizer(fmt: str) -> Tokenizer:
    """The format's real (or derived) test tokenizer; skips the test without the data."""
    kind, _, name = vocabulary(fmt).rpartition(":")
    if kind == "derived":
        return derived_tokenizer(name)
    if kind == "mistral":
        return mistral_tokenizer(name)
    return tokenizer_for(name)


def vocabulary(fmt: str) -> str:
    """The name of the format's test vocabulary (`TOKENIZERS`)."""
    try:
        return TOKENIZERS[fmt]
    except KeyError:
        raise AssertionError(f"format {fmt!r} has no test tokenizer in tests/cases.py") from None


def standalone_tokenizer(fmt: str) -> Tokenizer:
    """The format's test tokenizer, or the synthetic vocabulary when the shared data is
    absent (the invariants hold on any vocabulary; facts of a real one need the data)."""
    if fmt not in TOKENIZERS:
        raise AssertionError(f"format {fmt!r} has no test tokenizer in tests/cases.py")
    return tokenizer(fmt) if has_data() else synthetic_tokenizer()


# -- outputs no renderer writes: text inside sections, prose around calls ------------

#: Text, whitespace runs and (in `junk`) a stray delimiter, placed between a section's
#: opening and its first call, between calls, and before its close (or, for formats
#: without a section, around the calls in content).
AROUND = ("\n  alpha\nbeta  ", " gamma", "\n delta\n")
#: Prose after a call, as models write it (the separator before it is the point).
AFTER = "Meanwhile, more."
#: What the body of a call that did not end must hold to be returned at a stop.
INCOMPLETE_CALL = ("get_weather", {"days": 3})  # `city` is required


def section(fmt: Any) -> tuple[str, str]:
    """The format's section delimiters, or ("", "")."""
    return fmt.section if fmt.section is not None else ("", "")


def block(fmt: Any, call: tuple[str, dict[str, Any]]) -> str:
    """One call as the format writes it, without its section and surrounding space."""
    opener, closer = section(fmt)
    text = fmt.render([call])
    if opener:
        assert text.startswith(opener) and text.endswith(closer)
        text = text[len(opener) : len(text) - len(closer)]
    return text.strip()


def mark(fmt: Any) -> str:
    """An inner mark of the format's calls (text outside a call body), or ""."""
    marks = (*fmt.marks, *(fmt.header.marks if fmt.header is not None else ()))
    return marks[0] if marks else ""


#: Where a body's own end stands before the call's closing delimiter (tagged formats):
#: an unfinished body lacks both.
BODY_END = {
    "qwen3_coder": "</function>",
    "seed_oss": "</function>",
    "minimax_m2": "</invoke>",
    "minimax_m3": "]<]minimax[>[</invoke>",
}


NULLABLE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "annotate",
        "parameters": {
            "type": "object",
            "properties": {
                "note": {"type": ["string", "null"]},
                "label": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "count": {"type": ["integer", "null"]},
                "title": {"type": "string"},
            },
            "required": ["note"],
        },
    },
}
TOOLS.append(NULLABLE_TOOL)


# -- feeding a format's parser ---------------------------------------------------------


def feed(name: str, ids: Sequence[int], deltas: Sequence[int] = (), **options: Any) -> list[Event]:
    """Feed `ids` cut at the positions in `deltas`; return the merged events."""
    options.setdefault("tools", TOOLS)
    parser = Parser(name, tokenizer(name), **options)
    events: list[Event] = []
    start = 0
    for cut in [*deltas, len(ids)]:
        events += parser.feed(ids[start:cut])
        start = cut
    return merge(events + parser.finish())


def message(name: str, ids: Sequence[int], deltas: Sequence[int] = (), **options: Any) -> Message:
    return Message.from_events(feed(name, ids, deltas, **options))


def calls_of(msg: Message) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in msg.tool_calls]


def squash(text: str | None) -> str:
    return "".join((text or "").split())


def check_native_output(name: str, native: str, expected: tuple[str, Any]) -> None:
    """A format's own output of one call: that call, and nothing else, whole, one id
    per delta, in threes (held and streamed) and through `feed_text`."""
    ids = tokenizer(name).encode(native)
    whole = feed(name, ids)
    assert calls_of(Message.from_events(whole)) == [expected]
    assert Message.from_events(whole).content is None
    assert feed(name, ids, range(1, len(ids))) == whole
    for stream in (False, True):
        assert feed(name, ids, range(0, len(ids), 3), stream_arguments=stream) == feed(
            name, ids, stream_arguments=stream
        )
    text_parser = Parser(name, None, tools=TOOLS)  # text-only backends
    events = text_parser.feed_text(native) + text_parser.finish()
    assert calls_of(Message.from_events(events)) == [expected]
