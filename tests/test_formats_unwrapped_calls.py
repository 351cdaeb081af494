"""Calls no delimiter pair wraps: the behaviours each such format must show.

gpt_oss routes messages by their harmony header; llama3_json and pythonic begin a call
at a line start with a bare JSON object or Python list; mistral's calls follow a control
token and end themselves.

Real vocabularies throughout: o200k_harmony, Llama 3, and Mistral's tekken (v3) and
SentencePiece (v7) files loaded through mistral-common. gpt_oss and mistral are gated
(their call delimiters are control tokens); llama3_json and pythonic are the text-gated
fallback, where what holds instead of id gating is: a call begins only at a line start,
so a call quoted inside prose is content, and `<|python_tag|>` counts only as its id.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest

from tests import bfcl, cases
from tests.data import data_dir, mistral_tokenizer
from toolwire import Message, Parser, Tokenizer, UsageError, formats, load_tokenizer
from toolwire.events import Event, ToolCallBegin, merge

#: (format, tokenizer) pairs; mistral runs on both of its vocabularies.
SETUPS: dict[str, tuple[str, Any]] = {
    "gpt_oss": ("gpt_oss", lambda: cases.tokenizer("gpt_oss")),
    "llama3_json": ("llama3_json", lambda: cases.tokenizer("llama3_json")),
    "pythonic": ("pythonic", lambda: cases.tokenizer("pythonic")),
    "mistral-tekken": ("mistral", lambda: mistral_tokenizer("tekken_240718.json.gz")),
    "mistral-v7": (
        "mistral",
        lambda: mistral_tokenizer("mistral_instruct_tokenizer_241114.model.v7"),
    ),
}
GATED = {"gpt_oss", "mistral"}
WEATHER, SEARCH = cases.CALLS[0], cases.CALLS[1]


def setup(key: str) -> tuple[str, formats.Format, Tokenizer]:
    name, make = SETUPS[key]
    return name, formats.get(name), make()


def run(
    name: str, tok: Tokenizer, ids: Sequence[int], cuts: Sequence[int] = (), **options: Any
) -> list[Event]:
    parser = Parser(name, tok, tools=options.pop("tools", cases.TOOLS), **options)
    events: list[Event] = []
    start = 0
    for cut in [*cuts, len(ids)]:
        events += parser.feed(ids[start:cut])
        start = cut
    return merge(events + parser.finish())


def message(name: str, tok: Tokenizer, ids: Sequence[int], **options: Any) -> Message:
    return Message.from_events(run(name, tok, ids, **options))


def calls_of(msg: Message) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in msg.tool_calls]


def squash(text: str | None) -> str:
    return "".join((text or "").split())


def test_gating_is_as_documented() -> None:
    for key in SETUPS:
        name, _, tok = setup(key)
        assert Parser(name, tok).gated == (name in GATED), key


# -- echo -----------------------------------------------------------------------------


@pytest.mark.parametrize("key", [k for k in SETUPS if SETUPS[k][0] in GATED])
def test_a_call_spelled_from_sub_words_is_content(key: str) -> None:
    name, fmt, tok = setup(key)
    text = fmt.render_output(content=cases.CONTENT, calls=[WEATHER, SEARCH])
    spelled = tok.encode(text, delimiters=False)
    assert not set(spelled) & tok.special_ids  # mistral-common never makes a control id
    for stream in (False, True):
        msg = message(name, tok, spelled, stream_arguments=stream)
        assert msg.tool_calls == []
        assert squash(msg.content) == squash(text)


@pytest.mark.parametrize("key", ["llama3_json", "pythonic"])
def test_text_gated_calls_begin_only_at_a_line_start(key: str) -> None:
    name, fmt, tok = setup(key)
    call = fmt.render([WEATHER])
    quoted = f"The log said {call} and nothing else."
    for genuine in (True, False):  # text-gated: spelling does not matter, position does
        msg = message(name, tok, tok.encode(quoted, delimiters=genuine))
        assert msg.tool_calls == [] and msg.content == quoted
    msg = message(name, tok, tok.encode(f"Checking.\n{call}", delimiters=False))
    assert calls_of(msg) == [WEATHER] and msg.content == "Checking."


def test_llama3_python_tag_counts_only_as_its_id() -> None:
    _, fmt, tok = setup("llama3_json")
    text = "Sure <|python_tag|>" + fmt.render([WEATHER])
    genuine = message("llama3_json", tok, tok.encode(text))
    assert calls_of(genuine) == [WEATHER] and genuine.content == "Sure"
    spelled = message("llama3_json", tok, tok.encode(text, delimiters=False))
    assert spelled.tool_calls == [] and spelled.content == text


# -- truncation, undeclared tools -----------------------------------------------------


@pytest.mark.parametrize("key", list(SETUPS))
def test_a_truncated_call_is_content_when_held(key: str) -> None:
    name, fmt, tok = setup(key)
    ids = tok.encode(fmt.render_output(content=cases.CONTENT, calls=[SEARCH]))
    for cut in range(len(ids) - 6, len(ids) - 1):  # inside the arguments
        msg = message(name, tok, ids[:cut])
        assert msg.tool_calls == [], cut
        assert squash(msg.content) == squash(tok.decode(ids[:cut])), cut
        # Streaming: the call began once its name was known, and stays a call.
        streamed = message(name, tok, ids[:cut], stream_arguments=True)
        assert streamed.content == cases.CONTENT, cut
        assert [c.name for c in streamed.tool_calls] == ["search"], cut


@pytest.mark.parametrize("key", list(SETUPS))
def test_an_undeclared_tool_is_released_as_content(key: str) -> None:
    name, fmt, tok = setup(key)
    text = fmt.render_output(calls=[("rm_rf", {"path": "/"}), WEATHER])
    for stream in (False, True):
        msg = message(name, tok, tok.encode(text), stream_arguments=stream)
        assert calls_of(msg) == [WEATHER]
        assert "rm_rf" in (msg.content or "")


# -- reasoning, then a call ----------------------------------------------------------


def test_harmony_analysis_then_commentary_call() -> None:
    _, _, tok = setup("gpt_oss")
    text = (
        "<|channel|>analysis<|message|>Need the weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"city": "Paris", "days": 3}<|call|>'
    )
    ids = tok.encode(text)
    whole = run("gpt_oss", tok, ids)
    assert run("gpt_oss", tok, ids, range(1, len(ids))) == whole
    msg = Message.from_events(whole)
    assert msg.reasoning == "Need the weather." and msg.content is None
    assert calls_of(msg) == [WEATHER]


def test_mistral_think_then_call() -> None:
    _, fmt, tok = setup("mistral-tekken")
    text = fmt.render_output(reasoning="Need the weather.", calls=[WEATHER])
    msg = message("mistral", tok, tok.encode(text))
    assert msg.reasoning == "Need the weather." and calls_of(msg) == [WEATHER]


# -- two parallel calls in one delta, with the end of the first -----------------------


@pytest.mark.parametrize("stream", [False, True], ids=["held", "stream"])
@pytest.mark.parametrize("key", list(SETUPS))
def test_two_calls_in_one_delta_with_the_end_of_the_first(key: str, stream: bool) -> None:
    name, fmt, tok = setup(key)
    first = tok.encode(fmt.render([WEATHER]))
    ids = tok.encode(fmt.render([WEATHER, SEARCH]))
    whole = run(name, tok, ids, stream_arguments=stream)
    assert calls_of(Message.from_events(whole)) == [WEATHER, SEARCH]
    for back in (1, 2, 3):  # the second delta holds the first call's last ids and all else
        assert run(name, tok, ids, [len(first) - back], stream_arguments=stream) == whole


# -- harmony messages -----------------------------------------------------------------


def test_harmony_multi_message_output_in_every_header_shape() -> None:
    _, _, tok = setup("gpt_oss")
    text = (
        "<|channel|>analysis<|message|>Two calls.<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary json"
        '<|message|>{"city": "Paris", "days": 3}<|call|>'
        "<|start|>assistant<|channel|>commentary to=functions.get_time<|constrain|>json"
        "<|message|>{}<|call|>"
        "<|start|>assistant<|channel|>commentary to=functions.search <|constrain|>json"
        '<|message|>{"query": "x"}<|end|>'
        "<|start|>assistant<|channel|>commentary<|message|>Preamble.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Done.<|return|>"
    )
    ids = tok.encode(text)
    whole = run("gpt_oss", tok, ids)
    for cuts in (range(1, len(ids)), [5, 17, 40]):
        assert run("gpt_oss", tok, ids, cuts) == whole
    msg = Message.from_events(whole)
    assert msg.reasoning == "Two calls."
    assert msg.content == "Preamble.\nDone."  # two messages: a separator between
    assert calls_of(msg) == [WEATHER, ("get_time", {}), ("search", {"query": "x"})]


def test_harmony_messages_around_a_call_keep_their_separation() -> None:
    """A final message, a call message, a final message (and analysis messages around
    a call): separate messages are never glued; a released call message goes back
    exactly as written."""
    _, _, tok = setup("gpt_oss")
    call = (
        "<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json"
        '<|message|>{{"city": "Paris"}}<|call|>'
    )
    text = (
        "<|channel|>analysis<|message|>First.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Looking it up.<|end|>"
        + call.format(name="get_weather")
        + "<|start|>assistant<|channel|>analysis<|message|>Then.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Done.<|return|>"
    )
    ids = tok.encode(text)
    whole = run("gpt_oss", tok, ids)
    for cuts in (range(1, len(ids)), [3, 11, 29]):
        assert run("gpt_oss", tok, ids, cuts) == whole
    msg = Message.from_events(whole)
    assert (msg.reasoning, msg.content) == ("First.\nThen.", "Looking it up.\nDone.")
    assert calls_of(msg) == [("get_weather", {"city": "Paris"})]
    released = call.format(name="not_declared")
    text = "<|channel|>final<|message|>Looking it up.<|end|>" + released
    msg = message("gpt_oss", tok, tok.encode(text))
    # The call message is released exactly; `<|end|>` ended the message before it.
    assert msg.tool_calls == [] and msg.content == "Looking it up.\n" + released


def test_harmony_tool_choice_none_and_undeclared_recipients() -> None:
    _, _, tok = setup("gpt_oss")
    text = (
        "<|channel|>commentary to=python<|message|>print(1)<|call|>"
        "<|start|>assistant<|channel|>final<|message|>Hi.<|return|>"
    )
    msg = message("gpt_oss", tok, tok.encode(text))
    assert msg.tool_calls == [] and "print(1)" in (msg.content or "")
    call = "<|channel|>commentary to=functions.get_time<|message|>{}<|call|>"
    final = "<|start|>assistant<|channel|>final<|message|>Hi.<|return|>"
    none = message("gpt_oss", tok, tok.encode(call + final), tool_choice="none")
    assert none.tool_calls == [] and none.content == "Hi."


# -- pythonic typing ------------------------------------------------------------------


def test_pythonic_arguments_are_typed_by_the_schema() -> None:
    _, _, tok = setup("pythonic")
    tools = [
        {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {
                    "zip": {"type": "string"},
                    "n": {"type": "integer"},
                    "x": {"type": "number"},
                    "flag": {"type": "boolean"},
                    "pair": {"type": "array"},
                    "opts": {"type": "object"},
                },
            },
        }
    ]
    text = (
        "[f(zip=75001, n='3', x=-2.5e1, flag='true', pair=(1, 'a'), "
        "opts={'k': None, 'v': [True, 1.0]}, free=celsius, s='it\\'s \"q\"'), f()]"
    )
    ids = tok.encode(text)
    want = [
        (
            "f",
            {
                "zip": "75001",
                "n": 3,
                "x": -25.0,
                "flag": True,
                "pair": [1, "a"],
                "opts": {"k": None, "v": [True, 1.0]},
                "free": "celsius",
                "s": 'it\'s "q"',
            },
        ),
        ("f", {}),
    ]
    for stream in (False, True):
        whole = run("pythonic", tok, ids, tools=tools, stream_arguments=stream)
        assert calls_of(Message.from_events(whole)) == want
        assert (
            run("pythonic", tok, ids, range(1, len(ids)), tools=tools, stream_arguments=stream)
            == whole
        )


def test_pythonic_brackets_that_are_not_calls_stay_content() -> None:
    _, _, tok = setup("pythonic")
    for text in ("[1, 2, 3] is a list", "[link](https://x.y)", "[f(1, 2)]", "[]"):
        msg = message("pythonic", tok, tok.encode(text), tools=None)
        assert msg.tool_calls == [] and msg.content == text


# -- mistral specifics ----------------------------------------------------------------


@pytest.mark.parametrize("key", ["mistral-tekken", "mistral-v7"])
def test_mistral_older_array_form_and_call_ids(key: str) -> None:
    _, _, tok = setup(key)
    array = (
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}, '
        '"id": "a1b2c3d4e"}, {"name": "get_time", "arguments": {}}]'
    )
    ids = tok.encode(array)
    whole = run("mistral", tok, ids)
    assert run("mistral", tok, ids, range(1, len(ids))) == whole
    assert calls_of(Message.from_events(whole)) == [WEATHER, ("get_time", {})]
    v11 = "[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{}"
    msg = message("mistral", tok, tok.encode(v11))
    assert [(c.id, c.name) for c in msg.tool_calls] == [("a1b2c3d4e", "get_time")]


def test_mistral_adapter_mirrors_mistral_common() -> None:
    rng = random.Random(7)
    for key in ("mistral-tekken", "mistral-v7"):
        _, _, tok = setup(key)
        text = "café ☕ 日本語 [TOOL_CALLS] x"
        ids = tok.encode(text, delimiters=False)
        assert tok.added_tokens["[TOOL_CALLS]"] not in ids
        assert tok.encode("[TOOL_CALLS]")[0] == tok.added_tokens["[TOOL_CALLS]"]
        for _ in range(20):  # the detokenizer equals decode; split characters are held
            sample = [rng.randrange(tok.vocab_size) for _ in range(30)] + ids
            detok = tok.detokenizer()
            pieces = [detok.step(i) for i in sample]
            assert "".join(pieces) + detok.flush() == tok.decode(sample), key
        detok = tok.detokenizer()
        coffee = tok.encode("☕", delimiters=False)
        steps = [detok.step(i) for i in coffee]
        assert "".join(steps).strip() == "☕"
        assert len(coffee) == 1 or "" in steps[:-1]  # held until the character completes
    assert (
        load_tokenizer(data_dir() / "tokenizers/mistral/tekken_240718.json.gz").vocab_size == 131072
    )
    with pytest.raises(UsageError, match="Mistral files"):
        load_tokenizer(data_dir() / "tokenizers" / "mistral")


# -- BFCL round trips ------------------------------------------------------------------


@pytest.mark.parametrize("category", bfcl.CATEGORIES)
@pytest.mark.parametrize("key", list(SETUPS))
def test_bfcl_round_trips_in_random_chunkings(key: str, category: str) -> None:
    name, fmt, tok = setup(key)
    rng = random.Random(f"{key}-{category}")
    rows = bfcl.load(category)
    for case_id, tools, calls in rng.sample(rows, min(25, len(rows))):
        ids = tok.encode(fmt.render_output(calls=calls))
        for stream in (False, True):
            cuts = sorted(rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 12))))
            msg = Message.from_events(
                run(name, tok, ids, cuts, tools=tools, stream_arguments=stream)
            )
            assert msg.content is None, (case_id, msg.content)
            assert calls_of(msg) == [(n, dict(a)) for n, a in calls], case_id
            begins = [e for e in run(name, tok, ids, tools=tools) if isinstance(e, ToolCallBegin)]
            assert len(begins) == len(calls)
