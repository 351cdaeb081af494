"""A call written inside reasoning that has not closed (`Format.calls_in_reasoning`).

Per family, from its template and its peers' parsers: where a model is documented to
write calls before closing its reasoning (Qwen3 and Qwen3.5, Kimi K2, DeepSeek V4,
MiniMax, Gemma 4; and the message-structured formats, where a call is a message of
its own), the call is returned and ends the reasoning. Everywhere else reasoning runs
to its close, and a call inside it is quoted text: reasoning, every character of it,
as vLLM's reasoning parsers for those families read it. Each format is tested with
its own setting and with the other one, so both kinds hold on every format.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests import cases
from toolwire import Message, Parser, formats
from toolwire.events import merge
from toolwire.formats.spec import Format

CALL = ("get_weather", {"city": "Paris", "days": 3})
WITH_REASONING = [
    n for n in formats.names() if formats.get(n).reasoning or formats.get(n).render_text
]


def _parse(fmt: Format, name: str, text: str, stream: bool) -> Message:
    tok = cases.standalone_tokenizer(name)
    ids = tok.encode(text)
    whole = Parser(fmt, tok, tools=cases.TOOLS, stream_arguments=stream)
    events = merge(whole.feed(ids) + whole.finish())
    single = Parser(fmt, tok, tools=cases.TOOLS, stream_arguments=stream)
    assert merge([e for i in ids for e in single.feed([i])] + single.finish()) == events
    return Message.from_events(events)


@pytest.mark.parametrize("flip", [False, True], ids=["own", "flipped"])
@pytest.mark.parametrize("stream", [False, True], ids=["held", "stream"])
@pytest.mark.parametrize("name", WITH_REASONING)
def test_a_call_inside_unclosed_reasoning(name: str, stream: bool, flip: bool) -> None:
    fmt = formats.get(name)
    closes = {c for _, c in fmt.reasoning_pairs}
    if fmt.header is not None or closes & set(fmt.call):
        # Message-structured (harmony's headers, Inkling's blocks): a call is a message
        # of its own, which ends the reasoning message before it; never quoted there.
        assert fmt.calls_in_reasoning
        if flip:
            pytest.skip("a call is a message of its own in this format")
    if flip and fmt.anchor is not None and not fmt.calls_in_reasoning:
        # The parser looks for line-anchored calls (no token opens them) in content
        # only, so an anchored format cannot let them begin inside reasoning.
        pytest.skip("line-anchored calls are looked for in content only")
    if flip:
        fmt = replace(fmt, calls_in_reasoning=not fmt.calls_in_reasoning)
    call = fmt.render([CALL])
    # A line-anchored call (MiniCPM's) may begin only where a line begins.
    sep = "\n" if fmt.anchor is not None else " "
    text = fmt.render_output(reasoning=f"Plan.{sep}{call} more.", content="Done.")
    msg = _parse(fmt, name, text, stream)
    if fmt.calls_in_reasoning:  # the call ends the reasoning
        assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [CALL]
        assert msg.reasoning == "Plan."
    else:  # quoted: reasoning, every character, and the content after its close
        assert msg.tool_calls == []
        assert (msg.reasoning, msg.content) == (f"Plan.{sep}{call} more.", "Done.")


def test_the_families_setting() -> None:
    """The per-family decision, as the format modules record it."""
    allowed = {n for n in formats.names() if formats.get(n).calls_in_reasoning}
    assert allowed == {
        "qwen3", "qwen3_coder", "kimi_k2", "deepseek_v4", "deepseek_v41", "gemma4", "minimax_m2",
        "minimax_m3", "gpt_oss", "kimi_k3", "inkling", "apertus",
    }  # fmt: skip
    assert not formats.get("seed_oss").calls_in_reasoning  # the two the peers agree on
    assert not formats.get("hunyuan").calls_in_reasoning
