"""Bounded echoes: metadata to OpenAI's limits, every echoed field bounded, one copy.

The Responses API repeats `metadata`, `instructions`, `tools`, `text` and
`tool_choice` in its response object, which a stream sends three times. Through
toolwire in front of a scripted vLLM: past a bound is a 400 naming the field, before
the engine is asked; at the bounds, the stream carries the fields intact and costs
three copies of them, no more.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.production import Keyed, keyed, send
from toolwire.server.core.pipeline import Limits
from toolwire.server.responses.echo import (
    METADATA_KEY_CHARS,
    METADATA_PAIRS,
    METADATA_VALUE_CHARS,
    Echo,
)

MAX_ECHO = 64 * 1024
AT_LIMITS = {
    f"k{n:02d}".ljust(METADATA_KEY_CHARS, "k"): chr(0x61 + n) * METADATA_VALUE_CHARS
    for n in range(METADATA_PAIRS)
}


@pytest.fixture(scope="module")
def served() -> Iterator[Keyed]:
    with keyed(limits=Limits(timeout=10, max_echo_bytes=MAX_ECHO)) as server:
        yield server


def _too_much() -> list[tuple[str, dict[str, Any], str]]:
    key = "k" * (METADATA_KEY_CHARS + 1)
    return [
        ("pairs", {"metadata": {f"k{n}": "v" for n in range(METADATA_PAIRS + 1)}}, "metadata"),
        ("key", {"metadata": {key: "v"}}, "metadata"),
        ("value", {"metadata": {"note": "v" * (METADATA_VALUE_CHARS + 1)}}, "metadata.note"),
        ("not a string", {"metadata": {"n": 3}}, "metadata.n"),
        ("not an object", {"metadata": ["a"]}, "metadata"),
        ("instructions", {"instructions": "i" * (MAX_ECHO + 1)}, "instructions"),
        ("text", {"text": {"format": {"type": "text"}, "pad": "t" * MAX_ECHO}}, "text"),
        (
            "tools",
            {
                "tools": [
                    {
                        "type": "function",
                        "name": "f",
                        "description": "d" * MAX_ECHO,
                        "parameters": {"type": "object"},
                    }
                ]
            },
            "tools",
        ),
    ]


@pytest.mark.parametrize(
    ("fields", "param"), [c[1:] for c in _too_much()], ids=[c[0] for c in _too_much()]
)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_past_a_bound_is_a_400_naming_the_field(
    served: Keyed, fields: dict[str, Any], param: str, stream: bool
) -> None:
    sent = len(served.upstream.bodies)
    answer = send(served.url, "responses", stream=stream, **fields)
    assert answer.status == 400, answer.json
    error = answer.json["error"]
    assert (error["param"], error["type"]) == (param, "invalid_request_error")
    assert len(served.upstream.bodies) == sent


def test_at_the_bounds_the_stream_carries_three_copies_and_no_more(served: Keyed) -> None:
    instructions = "Be brief. " * ((MAX_ECHO - 100) // 10)
    fields = {"metadata": AT_LIMITS, "instructions": instructions, "max_output_tokens": 256}
    echoed = len(json.dumps({"metadata": AT_LIMITS, "instructions": instructions}))
    served.rig.script("A short answer, " * 20)
    raw = httpx.post(
        served.url + "/v1/responses",
        json={"model": "qwen3-test", "input": "hi", "stream": True, **fields},
        timeout=60,
    )
    assert raw.status_code == 200
    events = [json.loads(line[6:]) for line in raw.text.splitlines() if line.startswith("data: ")]
    snapshots = [e["response"] for e in events if "response" in e]
    assert [e["type"] for e in events if "response" in e] == [
        "response.created",
        "response.in_progress",
        "response.completed",
    ]
    for snapshot in snapshots:
        assert snapshot["metadata"] == AT_LIMITS and snapshot["instructions"] == instructions
    output = len(json.dumps(snapshots[-1]["output"]))
    # three snapshots carry the echo; everything else is the output (deltas, the done
    # events, the final object) and a few hundred bytes per event
    assert 3 * echoed < len(raw.content) < 3 * echoed + 6 * output + 400 * len(events)
    stored = httpx.get(f"{served.url}/v1/responses/{snapshots[-1]['id']}").json()
    assert stored == snapshots[-1]
    served.rig.script("Whole.")
    whole = send(served.url, "responses", **fields)
    assert whole.json["metadata"] == AT_LIMITS and whole.json["instructions"] == instructions


def test_the_spliced_event_is_the_event() -> None:
    response = {
        "id": "resp_1",
        "status": "in_progress",
        "instructions": 'é " \\ \n',
        "metadata": {"a": "b"},
        "tools": [],
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "output": [{"type": "message", "content": [{"text": "x"}]}],
        "usage": None,
    }
    echo = Echo.of(response)
    for event in (
        {"type": "response.created", "sequence_number": 0, "response": response},
        {"type": "response.output_text.delta", "sequence_number": 3, "delta": "y"},
    ):
        data = echo.sse(event)
        assert data.startswith(f"event: {event['type']}\ndata: ".encode())
        assert json.loads(data.split(b"data: ", 1)[1]) == event
    assert json.loads(Echo({}).sse({"type": "t", "response": {}}).split(b"data: ")[1]) == {
        "type": "t",
        "response": {},
    }
