"""The upstream's event stream: SSE splitting (backends/sse.py) and batches of events.

Invariants:

* `SseSplitter` returns the same event data however the body is cut into pieces, for
  every line ending (`\\n`, `\\r\\n`, `\\r`), events of several `data:` lines, comments
  and other fields; nothing after `data: [DONE]`.
* The engines make one Delta of the events that arrived together, and a bad event
  ends the stream after the ids of the good ones before it (vLLM and SGLang alike).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.data import tokenizer_for
from tests.serving import running, scripted_engine
from toolwire.backends.base import Delta, EngineError, Generation
from toolwire.backends.sse import SseSplitter

# -- the splitter --------------------------------------------------------------------

# data values: no line ends inside a line, and never the `[DONE]` marker
_line = st.text(st.characters(blacklist_characters="\r\n", codec="utf-8"), max_size=12).filter(
    lambda s: s.strip() != "[DONE]"
)
_event = st.fixed_dictionaries(
    {
        "data": st.lists(_line, max_size=3),  # no data line: the event yields nothing
        "comment": st.booleans(),
        "field": st.sampled_from([None, "event: delta", "id: 7", "retry: 10"]),
        "space": st.booleans(),  # `data: x` or `data:x`
    }
)


def _encode(event: dict[str, Any], end: str) -> str:
    lines = []
    if event["comment"]:
        lines.append(": keep-alive")
    if event["field"]:
        lines.append(event["field"])
    sep = "data: " if event["space"] else "data:"
    lines += [sep + value for value in event["data"]]
    if not lines:
        lines.append(": empty")
    return "".join(line + end for line in lines) + end


def _expected(events: list[dict[str, Any]]) -> list[bytes]:
    return ["\n".join(e["data"]).encode() for e in events if e["data"]]


def _split(body: bytes, cuts: list[int]) -> tuple[list[bytes], SseSplitter]:
    splitter = SseSplitter()
    out: list[bytes] = []
    points = sorted({min(c, len(body)) for c in cuts})
    for start, end in zip([0, *points], [*points, len(body)], strict=True):
        out += splitter.feed(body[start:end])
    out += splitter.finish()
    return out, splitter


@given(
    events=st.lists(_event, max_size=8),
    end=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    done=st.booleans(),
)
def test_events_are_the_same_however_the_body_is_cut(
    events: list[dict[str, Any]], end: str, cuts: list[int], done: bool
) -> None:
    body = "".join(_encode(e, end) for e in events)
    if done:
        body += f"data: [DONE]{end}{end}data: after{end}{end}"
    raw = body.encode()
    whole, _ = _split(raw, [])
    cut, splitter = _split(raw, cuts)
    one_by_one, _ = _split(raw, list(range(len(raw))))
    assert whole == cut == one_by_one == _expected(events)
    assert splitter.done is done


def test_an_unterminated_last_event_is_read_at_the_end() -> None:
    splitter = SseSplitter()
    assert splitter.feed(b'data: {"a": 1}\n\ndata: {"b"') == [b'{"a": 1}']
    assert splitter.feed(b": 2}") == []
    assert splitter.finish() == [b'{"b": 2}']
    assert not splitter.done


def test_a_carriage_return_split_from_its_line_feed_is_one_line_end() -> None:
    splitter = SseSplitter()
    assert splitter.feed(b"data: 1\r\n\r") == []
    assert splitter.feed(b"\ndata: 2\r\n\r\n") == [b"1", b"2"]


def test_nothing_is_read_after_done() -> None:
    splitter = SseSplitter()
    assert splitter.feed(b"data: 1\n\ndata: [DONE]\n\ndata: 2\n\n") == [b"1"]
    assert splitter.done
    assert splitter.feed(b"data: 3\n\n") == []
    assert splitter.finish() == []


# -- batches through the engines -----------------------------------------------------


def _body(protocol: str, chunks: list[list[int]], bad: Any = None) -> bytes:
    """The events of `chunks` (the last finishing), or of `chunks` then `bad` (a raw
    event), as one piece."""
    events: list[Any] = []
    total: list[int] = []
    for n, chunk in enumerate(chunks):
        total += chunk
        last = bad is None and n == len(chunks) - 1
        if protocol == "vllm":
            choice = {"index": 0, "text": "", "token_ids": chunk}
            events.append({"choices": [{**choice, "finish_reason": "stop" if last else None}]})
        else:
            meta = {"completion_tokens": len(total), "finish_reason": None}
            if last:
                meta["finish_reason"] = {"type": "stop"}
            events.append({"output_ids": list(total), "meta_info": meta})
    if bad is not None:
        events.append(bad)
    text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return text.encode()


def _one_piece(body: bytes) -> Starlette:
    async def handle(request: Request) -> Response:
        await request.body()
        return Response(body, media_type="text/event-stream")  # one write, not chunked

    return Starlette(
        routes=[Route(p, handle, methods=["POST"]) for p in ("/v1/completions", "/generate")]
    )


def _deltas(protocol: str, body: bytes) -> tuple[list[Delta], EngineError | None]:
    async def collect() -> tuple[list[Delta], EngineError | None]:
        engine = scripted_engine(protocol, url)
        out: list[Delta] = []
        try:
            async for delta in engine.stream(Generation(prompt_ids=[1, 2], max_tokens=64)):
                out.append(delta)
        except EngineError as exc:
            return out, exc
        finally:
            await engine.close()
        return out, None

    with running(_one_piece(body)) as url:
        return asyncio.run(collect())


CHUNKS = [[785, 3974], [13876, 38835], [34208], [916, 279]]


@pytest.mark.parametrize("protocol", ["vllm", "sglang"])
def test_events_that_arrive_together_are_one_delta(protocol: str) -> None:
    deltas, error = _deltas(protocol, _body(protocol, CHUNKS))
    assert error is None
    assert [i for d in deltas for i in d.ids] == [i for c in CHUNKS for i in c]
    assert len(deltas) < len(CHUNKS)  # one piece on the wire: batched, not one per event
    assert deltas[-1].finish_reason == "stop"
    assert all(d.finish_reason is None for d in deltas[:-1])


def _bad_event(protocol: str) -> dict[str, Any]:
    vocab = tokenizer_for("qwen3").vocab_size
    if protocol == "vllm":
        return {"choices": [{"index": 0, "text": "", "token_ids": [vocab], "finish_reason": None}]}
    seen = [i for c in CHUNKS for i in c]
    meta = {"completion_tokens": len(seen) + 1, "finish_reason": None}
    return {"output_ids": [*seen, vocab + 3], "meta_info": meta}


@pytest.mark.parametrize("protocol", ["vllm", "sglang"])
@pytest.mark.parametrize("bad", ["outside the vocabulary", "not JSON", "an error payload"])
def test_a_bad_event_ends_the_stream_after_the_good_ones(protocol: str, bad: str) -> None:
    if bad == "not JSON":
        body = _body(protocol, CHUNKS, bad={}).replace(b"data: {}", b"data: {oops")
    elif bad == "an error payload":
        body = _body(protocol, CHUNKS, bad={"error": {"message": "engine died"}})
    else:
        body = _body(protocol, CHUNKS, bad=_bad_event(protocol))
    deltas, error = _deltas(protocol, body)
    assert isinstance(error, EngineError)
    assert [i for d in deltas for i in d.ids] == [i for c in CHUNKS for i in c]
    assert all(d.finish_reason is None for d in deltas)
