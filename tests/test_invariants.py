"""The parser's guarantees (docs/parser.md), each a test over every registered format.

Vectors are built from each format's own renderer (`Format.render_output`) and its
test tokenizer (`tests/cases.py`; the synthetic vocabulary of `tests/vocabulary.py`
when the shared data is absent), so a new format is covered by registering it. Ids
are produced two ways: `tok.encode(text)` (delimiters matched: what a model emits)
and `tok.encode(text, delimiters=False)` (spelled: what a model copying text emits).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import cases
from toolwire import Message, Parser, Tokenizer, formats
from toolwire.events import (
    Content,
    Event,
    Reasoning,
    ToolCallArguments,
    ToolCallBegin,
    ToolCallEnd,
    merge,
)
from toolwire.lexicon import lexicon

FORMATS = formats.names()
MODES = [False, True]  # stream_arguments


@dataclass(frozen=True)
class Vector:
    name: str
    ids: tuple[int, ...]
    #: expected calls as (name, arguments object); None when any outcome is acceptable
    calls: tuple[tuple[str, dict[str, Any]], ...] | None
    #: Parser options, and "finish": the reason passed to `finish()`.
    options: tuple[tuple[str, Any], ...] = ()
    #: The exact content expected in held mode, where it is known.
    content: str | None = None
    #: Whether `calls` and `content` hold with stream_arguments too (a call cut off at
    #: the end of output stays a call when streaming).
    streamed: bool = True


def _ids(tok: Tokenizer | None, parts: Sequence[tuple[str, bool]]) -> tuple[int, ...]:
    """Encode text pieces; the flag says whether delimiters are matched (genuine).
    Without a tokenizer (collection: `_all` names the vectors), no ids."""
    if tok is None:
        return ()
    out: list[int] = []
    for text, genuine in parts:
        out += tok.encode(text, delimiters=genuine)
    return tuple(out)


def _with_reasoning(fmt: formats.Format) -> dict[str, Any]:
    return {"reasoning": cases.REASONING} if fmt.reasoning or fmt.render_text else {}


@cache
def vectors(name: str) -> tuple[Vector, ...]:
    """The format's vectors on its test tokenizer (skips the test without it)."""
    return _build(name, cases.standalone_tokenizer(name))


def _build(name: str, tok: Tokenizer | None) -> tuple[Vector, ...]:
    """The format's vectors; without a tokenizer their names and expectations only
    (what they are depends on the format alone, their ids on the vocabulary)."""
    fmt = formats.get(name)
    r = _with_reasoning(fmt)
    out: list[Vector] = []

    def add(vname: str, text: str, calls: Any, genuine: bool = True, **options: Any) -> None:
        out.append(Vector(vname, _ids(tok, [(text, genuine)]), calls, tuple(options.items())))

    add("content", fmt.render_output(content=cases.CONTENT), ())
    if r:
        add("reasoning+content", fmt.render_output(content=cases.CONTENT, **r), ())
    for i, call in enumerate(cases.CALLS):
        add(f"call{i}", fmt.render_output(calls=[call]), (call,))
    two = cases.CALLS[:2]
    add("content+2calls", fmt.render_output(content=cases.CONTENT, calls=two, **r), tuple(two))
    add("all calls", fmt.render_output(calls=cases.CALLS), tuple(cases.CALLS))
    add("echo", fmt.render_output(content=cases.CONTENT, calls=two), None, genuine=False)
    genuine = fmt.render_output(content=cases.CONTENT, calls=[cases.CALLS[0]])
    echoed = fmt.render(cases.CALLS[1:2])
    out.append(
        Vector(
            "prose, genuine, echo",
            _ids(tok, [(genuine + "\n\nAs the log said: ", True), (echoed, False)]),
            (cases.CALLS[0],),
        )
    )
    undeclared = fmt.render_output(content=cases.CONTENT, calls=[("not_declared", {"a": 1})])
    add("undeclared", undeclared, ())
    whole = _ids(tok, [(fmt.render(cases.CALLS[:1]), True)])
    out.append(Vector("truncated", whole[: len(whole) * 2 // 3], None))
    out += _structure_vectors(fmt, tok)
    return tuple(out)


def _structure_vectors(fmt: formats.Format, tok: Tokenizer | None) -> list[Vector]:
    """Outputs no renderer writes: text, whitespace and stray delimiters inside a
    section (or around calls, for formats without one), prose on both sides of a
    call, released structure, bodies that never ended, null values."""
    out: list[Vector] = []
    opener, closer = cases.section(fmt)
    anchored = fmt.anchor is not None  # a call may begin only at a line start
    line = "\n" if anchored else ""
    mark = cases.mark(fmt)
    first, second = cases.CALLS[0], cases.CALLS[3]
    lead, middle, tail = cases.AROUND

    # Released text is every character as written, less the special tokens that are
    # not the format's delimiters (dropped everywhere: Inkling's `<|message_model|>`).
    dropped = [tok.token_text(i) for i in lexicon(fmt, tok).drop] if tok is not None else []

    def add(vname: str, text: str, calls: Any, content: str | None, **options: Any) -> None:
        streamed = options.pop("streamed", True)
        ids = _ids(tok, [(text, True)])
        for special in dropped if content else ():
            content = content.replace(special, "")
        out.append(Vector(vname, ids, calls, tuple(options.items()), content, streamed))

    # 1. Text, whitespace runs, an inner mark (text outside a body) and a stray opener
    # (markup) between the opening, the calls and the close.
    text = (
        opener + lead + "\n" + cases.block(fmt, first) + middle + mark + opener + " \n"
        + cases.block(fmt, second) + tail + closer
    )  # fmt: skip
    expected = "alpha\nbeta  \ngamma" + mark + " \ndelta"
    add("text inside the section", text, (first, second), expected)
    # 3. Released structure: every character, in order, delimiters included.
    if opener:
        text = f"{cases.CONTENT} {opener}{lead}{mark}{opener}{tail}{closer} after."
        add("section without a call", text, (), text)
    undeclared = cases.block(fmt, ("not_declared", {"a": 1, "b": "x y"}))
    text = f"{cases.CONTENT}\n{opener}\n{undeclared}\n{closer}\nafter."
    add("section with an undeclared call", text, (), text)
    # 2. Prose, a call, prose: the two runs keep a separator, written or not.
    call = opener + cases.block(fmt, first) + closer
    for after in ("\n", ""):
        text = cases.CONTENT + line + call + after + cases.AFTER
        vname = f"prose, call, prose ({after!r})"
        add(vname, text, (first,), cases.CONTENT + "\n" + cases.AFTER)
    # 4. A body that never ended: a call at a stop only when complete for the schema;
    # never when the output was cut off.
    close = cases.BODY_END.get(fmt.name) or fmt.call[1]
    if close:
        mistyped = ("get_weather", {"city": "Paris", "days": "soon"})  # days: integer
        for call, complete, reasons in (
            (first, True, (None, "stop", "length")),
            (cases.INCOMPLETE_CALL, False, (None, "stop", "length")),
            (mistyped, False, ("stop",)),
        ):
            rendered = fmt.render_output(calls=[call])
            text = cases.CONTENT + "\n" + rendered[: rendered.rindex(close)]
            released = text.rstrip()
            for reason in reasons:
                returned = complete and reason != "length"
                add(
                    f"unfinished, {call[1]}, {reason}",
                    text,
                    (call,) if returned else (),
                    cases.CONTENT if returned else released,
                    finish=reason,
                    streamed=returned,
                )
    # 5. Null where the schema allows it, in the format's own spelling of null.
    nulls = ("annotate", {"note": None, "label": None, "count": None, "title": "null"})
    add("nullable parameters", fmt.render_output(calls=[nulls]), (nulls,), None)
    return out


def _echo_inside(fmt: formats.Format, tok: Tokenizer) -> tuple[tuple[int, ...], str]:
    """A genuine call whose string argument holds the format's delimiters, spelled."""
    marker = "QQXQQ"
    text = fmt.render_output(calls=[("search", {"query": marker})])
    left, right = text.split(marker)
    injected = "".join(d for d in (fmt.call[1], fmt.call[0], *fmt.marks) if d)
    if fmt.section:
        injected = fmt.section[1] + injected + fmt.section[0]
    return _ids(tok, [(left, True), (injected, False), (right, True)]), injected


def run(name: str, ids: Sequence[int], cuts: Sequence[int] = (), **options: Any) -> list[Event]:
    """Feed ids cut at `cuts` (sorted positions); return the merged events.
    `finish` is the reason passed to `Parser.finish`."""
    reason = options.pop("finish", None)
    parser = Parser(name, cases.standalone_tokenizer(name), tools=cases.TOOLS, **options)
    events: list[Event] = []
    start = 0
    for cut in [*cuts, len(ids)]:
        events += parser.feed(ids[start:cut])
        start = cut
    events += parser.finish(reason)
    return merge(events)


def message(name: str, ids: Sequence[int], **options: Any) -> Message:
    return Message.from_events(run(name, ids, **options))


def _check_calls(msg: Message, expected: Sequence[tuple[str, dict[str, Any]]]) -> None:
    got = [(c.name, json.loads(c.arguments)) for c in msg.tool_calls]
    assert got == [(n, dict(a)) for n, a in expected]


def _all() -> list[Any]:
    """(format, vector index, vector name) for every vector, named without loading a
    tokenizer (collection stays cheap; a format whose tokenizer is unavailable here, an
    extra not installed, skips its items with the reason when they run)."""
    return [
        pytest.param((name, i, v.name), id=f"{name}-{v.name}")
        for name in FORMATS
        for i, v in enumerate(_build(name, None))
    ]


def _vector(case: tuple[str, int, str]) -> Vector:
    name, index, vname = case
    vector = vectors(name)[index]
    assert vector.name == vname  # the vocabulary does not change which vectors there are
    return vector


ALL = _all()


# -- 1. one path; 2. chunk invariance -----------------------------------------------


@pytest.mark.parametrize("stream", MODES, ids=["held", "stream"])
@pytest.mark.parametrize("case", ALL)
def test_one_id_per_delta_and_every_two_split_match_the_single_chunk(
    case: tuple[str, int, str], stream: bool
) -> None:
    name = case[0]
    vector = _vector(case)
    ids, options = vector.ids, dict(vector.options, stream_arguments=stream)
    whole = run(name, ids, **options)
    assert run(name, ids, range(1, len(ids)), **options) == whole
    for cut in range(len(ids) + 1):
        assert run(name, ids, [cut], **options) == whole, cut


@pytest.mark.parametrize("name", FORMATS)
@given(data=st.data())
def test_random_partitions_match_the_single_chunk(name: str, data: st.DataObject) -> None:
    vector = data.draw(st.sampled_from(vectors(name)))
    stream = data.draw(st.booleans())
    ids, options = vector.ids, dict(vector.options, stream_arguments=stream)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(ids)), max_size=len(ids))))
    assert run(name, ids, cuts, **options) == run(name, ids, **options)


# -- correctness of the vectors ------------------------------------------------------


@pytest.mark.parametrize("stream", MODES, ids=["held", "stream"])
@pytest.mark.parametrize("case", ALL)
def test_vectors_give_the_expected_calls(case: tuple[str, int, str], stream: bool) -> None:
    name = case[0]
    vector = _vector(case)
    msg = message(name, vector.ids, stream_arguments=stream, **dict(vector.options))
    checked = vector.streamed or not stream
    if vector.calls is not None and checked and not (stream and vector.name == "truncated"):
        _check_calls(msg, vector.calls)
    if vector.content is not None and checked:
        assert msg.content == (vector.content or None)
    for call in msg.tool_calls:
        assert call.name in {t["function"]["name"] for t in cases.TOOLS}


@pytest.mark.parametrize("name", FORMATS)
def test_reasoning_and_content_are_routed(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    r = _with_reasoning(fmt)
    text = fmt.render_output(content=cases.CONTENT, calls=[cases.CALLS[0]], **r)
    msg = message(name, tok.encode(text))
    assert msg.content == cases.CONTENT
    assert msg.reasoning == (cases.REASONING if r else None)
    _check_calls(msg, [cases.CALLS[0]])


# -- 3. token-id gating --------------------------------------------------------------


@pytest.mark.parametrize("name", FORMATS)
def test_spelled_calls_are_content_when_gated(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    text = fmt.render_output(content=cases.CONTENT, calls=cases.CALLS[:2])
    spelled = tok.encode(text, delimiters=False)
    parser = Parser(name, tok, tools=cases.TOOLS)
    assert parser.gated == (name not in cases.UNGATED)
    if not parser.gated:
        # Text fallback: the same text gives the same result however it is spelled.
        assert message(name, spelled) == message(name, tok.encode(text))
        return
    msg = message(name, spelled)
    assert msg.tool_calls == []
    assert _squash(msg.content) == _squash(text)


@pytest.mark.parametrize("stream", MODES, ids=["held", "stream"])
@pytest.mark.parametrize("name", FORMATS)
def test_spelled_delimiters_inside_a_genuine_call_are_argument_text(
    name: str, stream: bool
) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    if not Parser(name, tok).gated:
        pytest.skip(f"{name} is text-matched with this tokenizer (gated is False)")
    ids, injected = _echo_inside(fmt, tok)
    for cuts in ([], range(1, len(ids))):
        msg = Message.from_events(run(name, ids, cuts, stream_arguments=stream))
        _check_calls(msg, [("search", {"query": injected})])


# -- 4. conservation -----------------------------------------------------------------


def _squash(text: str | None) -> str:
    return "".join((text or "").split())


@pytest.mark.parametrize("name", FORMATS)
def test_released_calls_keep_every_character(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    # The content's own markup (a format's content channel, `render_text`) is markup;
    # the released call is every character, less the special tokens dropped anywhere.
    prose = fmt.render_output(content=cases.CONTENT)
    dropped = [tok.token_text(i) for i in lexicon(fmt, tok).drop]
    for calls in ([("not_declared", {"a": 1})], [cases.CALLS[0]]):
        text = fmt.render_output(content=cases.CONTENT, calls=calls)
        if calls[0][0] != "not_declared":  # cut inside an argument value
            text = text[: text.index("Paris") + 2]
        assert text.startswith(prose)
        ids = tok.encode(text)
        msg = message(name, ids)
        assert msg.tool_calls == []
        released = tok.decode(tok.encode(text[len(prose) :]))
        for special in dropped:
            released = released.replace(special, "")
        assert _squash(msg.content) == _squash(cases.CONTENT + released)


@pytest.mark.parametrize("name", FORMATS)
def test_outputs_without_calls_lose_only_markup(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    r = _with_reasoning(fmt)
    text = fmt.render_output(content=cases.CONTENT, **r)
    msg = message(name, tok.encode(text))
    assert _squash(msg.content) + _squash(msg.reasoning) == _squash(
        cases.CONTENT + (cases.REASONING if r else "")
    )


@pytest.mark.parametrize("name", FORMATS)
def test_strict_raises_on_an_incomplete_call(name: str) -> None:
    from toolwire import MalformedOutput

    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    ids = tok.encode(fmt.render([cases.CALLS[0]]))
    ids = ids[: len(ids) // 2]
    with pytest.raises(MalformedOutput):
        message(name, ids, strict=True)


# -- 5. special tokens ---------------------------------------------------------------


@pytest.mark.parametrize("name", FORMATS)
def test_special_tokens_never_reach_content_or_reasoning(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    delimiter_ids = {i for d in fmt.delimiters for i in tok.encode(d)} | {
        tok.added_tokens[k] for k in fmt.keep if k in tok.added_tokens
    }
    specials = sorted(tok.special_ids - delimiter_ids)
    assert specials, "the tokenizer has special tokens to test with"
    rng = random.Random(name)
    base = list(tok.encode(fmt.render_output(content=cases.CONTENT, **_with_reasoning(fmt))))
    for _ in range(20):
        ids = list(base)
        chosen = rng.sample(specials, min(3, len(specials)))
        for special in chosen:
            ids.insert(rng.randrange(len(ids) + 1), special)
        msg = message(name, ids)
        for special in chosen:
            text = tok.token_text(special)
            assert text not in (msg.content or "") and text not in (msg.reasoning or "")


# -- 6. tool_choice ------------------------------------------------------------------


@pytest.mark.parametrize("stream", MODES, ids=["held", "stream"])
@pytest.mark.parametrize("name", FORMATS)
def test_tool_choice_none_consumes_markup(name: str, stream: bool) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    text = fmt.render_output(content=cases.CONTENT, calls=cases.CALLS[:2])
    msg = message(name, tok.encode(text), tool_choice="none", stream_arguments=stream)
    assert msg.tool_calls == []
    assert msg.content == cases.CONTENT


@pytest.mark.parametrize("name", FORMATS)
def test_named_choice_returns_only_that_tool(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    text = fmt.render_output(calls=[cases.CALLS[0], cases.CALLS[3]])
    named = {"type": "function", "function": {"name": "get_time"}}
    msg = message(name, tok.encode(text), tool_choice=named)
    assert [c.name for c in msg.tool_calls] == ["get_time"]
    assert "get_weather" in (msg.content or "")
    required = message(name, tok.encode(text), tool_choice="required")
    assert [c.name for c in required.tool_calls] == ["get_weather", "get_time"]


@pytest.mark.parametrize("name", FORMATS)
def test_parallel_tool_calls_false_returns_one_call(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    text = fmt.render_output(calls=cases.CALLS[:2])
    msg = message(name, tok.encode(text), parallel_tool_calls=False)
    assert [c.name for c in msg.tool_calls] == ["get_weather"]


# -- 7. arguments --------------------------------------------------------------------


@pytest.mark.parametrize("name", FORMATS)
def test_argument_fragments_join_to_the_final_json_object(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    ids = tok.encode(fmt.render_output(calls=cases.CALLS))
    parser = Parser(name, tok, tools=cases.TOOLS, stream_arguments=True)
    events: list[Event] = []
    for i in ids:
        events += parser.feed([i])
    events += parser.finish()
    fragments: dict[int, list[str]] = {}
    for event in events:
        if isinstance(event, ToolCallArguments):
            assert event.text
            fragments.setdefault(event.index, []).append(event.text)
    msg = Message.from_events(events)
    assert len(msg.tool_calls) == len(cases.CALLS)
    for index, call in enumerate(msg.tool_calls):
        assert "".join(fragments.get(index, [])) == call.arguments
        assert isinstance(json.loads(call.arguments), dict)
    begins = [e for e in events if isinstance(e, ToolCallBegin)]
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [b.index for b in begins] == [e.index for e in ends] == list(range(len(cases.CALLS)))


@pytest.mark.parametrize("name", FORMATS)
def test_streamed_name_comes_before_its_arguments_finish(name: str) -> None:
    """With stream_arguments, a long call shows its name before the body closes."""
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    call = ("search", {"query": "word " * 200})
    ids = tok.encode(fmt.render_output(calls=[call]))
    parser = Parser(name, tok, tools=cases.TOOLS, stream_arguments=True)
    seen_begin_at = None
    for n, token in enumerate(ids):
        if any(isinstance(e, ToolCallBegin) for e in parser.feed([token])):
            seen_begin_at = n
            break
    assert seen_begin_at is not None and seen_begin_at < len(ids) // 2


# -- fuzzing -------------------------------------------------------------------------


@pytest.mark.parametrize("name", FORMATS)
@given(data=st.data())
def test_random_ids_give_only_events(name: str, data: st.DataObject) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    hot = sorted({i for d in fmt.delimiters for i in tok.encode(d)} | set(tok.special_ids))[:64]
    ident = st.one_of(
        st.integers(0, tok.vocab_size - 1),
        st.sampled_from(hot),
        st.sampled_from(list(tok.encode('{"name": "search", "arguments": {"q": 1}} ()[]="'))),
    )
    ids = data.draw(st.lists(ident, max_size=80))
    stream = data.draw(st.booleans())
    choice = data.draw(st.sampled_from(["auto", "none", "required"]))
    cut = data.draw(st.integers(0, len(ids)))
    options = {"stream_arguments": stream, "tool_choice": choice}
    options["finish"] = data.draw(st.sampled_from([None, "stop", "length"]))
    events = run(name, ids, [cut], **options)
    assert events == run(name, ids, **options)
    msg = Message.from_events(events)
    for event in events:
        if isinstance(event, (Content, Reasoning)):
            assert event.text
            assert not any(0xD800 <= ord(c) <= 0xDFFF for c in event.text)
    if not stream:
        for call in msg.tool_calls:
            assert isinstance(json.loads(call.arguments), dict)


@pytest.mark.parametrize("name", FORMATS)
def test_a_call_missing_only_its_closing_delimiter_is_still_a_call(name: str) -> None:
    fmt = formats.get(name)
    close = fmt.call[1]
    if close is None:
        pytest.skip(f"{name} calls have no closing delimiter")
    tok = cases.standalone_tokenizer(name)
    text = fmt.render_output(content=cases.CONTENT, calls=[cases.CALLS[0]])
    cut = text.rindex(close)
    msg = message(name, tok.encode(text[:cut]))
    _check_calls(msg, [cases.CALLS[0]])
    assert msg.content == cases.CONTENT


# -- generated structure: text and stray delimiters inside sections and around calls --

#: Text pieces placed inside a section (or around calls, for formats without one).
_TEXT = [" ", "\n", "  \n ", "x", "note: a b", "日本"]


def _strays(fmt: formats.Format, tok: Tokenizer) -> tuple[list[str], list[str]]:
    """Delimiters that do not act where the generated test puts them: those that are
    text there (inner marks; outside a section, a delimiter with no token of its own)
    and the others (markup outside a section, held text inside one)."""
    marks = [cases.mark(fmt)] if cases.mark(fmt) else []
    others = [cases.section(fmt)[0], fmt.call[1] or "", fmt.reasoning[1] if fmt.reasoning else ""]
    others = [d for d in others if d]
    if fmt.section is None:
        plain = lexicon(fmt, tok).plain
        marks += [d for d in others if d in plain]
    return marks, [d for d in others if d not in marks]


@pytest.mark.parametrize("name", FORMATS)
@settings(max_examples=max(20, settings.default.max_examples // 8))
@given(data=st.data())
def test_generated_text_inside_sections_keeps_every_guarantee(
    name: str, data: st.DataObject
) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    opener, closer = cases.section(fmt)
    marks, others = _strays(fmt, tok)
    piece = st.lists(st.sampled_from(_TEXT + marks + others), max_size=4)
    pool = [cases.CALLS[0], cases.CALLS[3], ("not_declared", {"a": "x"})]
    calls = data.draw(st.lists(st.sampled_from(pool), max_size=3))
    gaps = [data.draw(piece) for _ in range(len(calls) + 1)]
    line = "\n" if fmt.anchor is not None else ""  # such calls begin at a line start
    parts: list[tuple[str, str]] = [(opener, "markup")]  # (text, what it becomes)
    for gap, call in zip(gaps, [*calls, None], strict=True):
        parts += [(p, "text" if p in _TEXT or p in marks else "stray") for p in gap]
        if call is not None:
            declared = call[0] != "not_declared"
            parts += [(line, "text"), (cases.block(fmt, call), "call" if declared else "text")]
    parts.append((closer, "markup"))
    text = "".join(p for p, _ in parts)
    ids = _ids(tok, [(text, True)])
    cuts = sorted(data.draw(st.sets(st.integers(0, len(ids)), max_size=len(ids))))
    for stream in MODES:
        whole = run(name, ids, stream_arguments=stream)
        assert run(name, ids, cuts, stream_arguments=stream) == whole
    msg = Message.from_events(whole if not stream else run(name, ids))
    returned = [c for c in calls if c[0] != "not_declared"]
    _check_calls(msg, returned)
    if opener and not returned:  # released whole: exactly the decoded ids
        assert msg.content == (tok.decode(list(ids)) or None)
    else:  # the section (or the calls) is structure: its text is content
        kept = "".join(p for p, kind in parts if kind == "text")
        assert _squash(msg.content) == _squash(kept)


#: Prose that ends in whitespace, or not, before a section (or calls).
_PROSE = ["Reasoning. ", "Reasoning.", "Reasoning.\n\n", ""]


@pytest.mark.parametrize("name", [n for n in FORMATS if formats.get(n).section is not None])
@settings(max_examples=max(20, settings.default.max_examples // 4))
@given(data=st.data())
def test_whitespace_at_the_edges_of_text_inside_a_section_is_chunk_invariant(
    name: str, data: st.DataObject
) -> None:
    """Prose, then a section whose stray text has whitespace at its edges (before its
    first call, between calls, before its close), then prose: every chunking, one id
    per delta included, gives the one-delta events, held and streamed, whether a call
    of the section is returned or none is."""
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    opener, closer = cases.section(fmt)
    gap = st.lists(st.sampled_from([*_TEXT, " spurious noise ", " x\n", "\t"]), max_size=3)
    pool = [cases.CALLS[0], ("not_declared", {"a": "x"})]
    calls = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2))
    text = data.draw(st.sampled_from(_PROSE)) + opener
    for call in calls:
        text += "".join(data.draw(gap)) + cases.block(fmt, call)
    text += (
        "".join(data.draw(gap)) + closer + data.draw(st.sampled_from(["", " after", "\nafter "]))
    )
    ids = _ids(tok, [(text, True)])
    cuts = sorted(data.draw(st.sets(st.integers(0, len(ids)), max_size=len(ids))))
    for stream in MODES:
        whole = run(name, ids, stream_arguments=stream)
        assert run(name, ids, range(1, len(ids)), stream_arguments=stream) == whole
        assert run(name, ids, cuts, stream_arguments=stream) == whole


#: String values a plain step takes whole or in part: JSON escapes cut anywhere by the
#: tokenizer (`\n`, `\\`, `\"`, a lone `\` the next token's `n` ends), newlines inside
#: a value and at its end (the one an XML format trims), code's own indentation.
CODE_VALUES = [
    'def f(x):\n    return "a\\\\b" + x\n\n\n',
    '    if a:\n        print("x\\n", end="")\n\n',
    "line one\nline two\n",
    '\\\\\\"\\n\\t\\u00e9 "quoted"\n\n\nend\n',
]


@pytest.mark.parametrize("name", FORMATS)
def test_streamed_code_values_equal_held(name: str) -> None:
    """One id per delta, streamed, gives the held call for code-like string values
    (the plain step's escapes and newlines; a wrong held newline or escape shows here)."""
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    for value in CODE_VALUES:
        calls = [("search", {"query": value, "limit": 3})]
        ids = tok.encode(fmt.render_output(calls=calls))
        whole = Parser(name, tok, tools=cases.TOOLS)
        held = Message.from_events(whole.feed(ids) + whole.finish())
        parser = Parser(name, tok, tools=cases.TOOLS, stream_arguments=True)
        events: list[Event] = []
        for i in ids:
            events += parser.feed([i])
        events += parser.finish()
        streamed = Message.from_events(events)
        assert [c.name for c in streamed.tool_calls] == ["search"], value
        assert json.loads(streamed.tool_calls[0].arguments) == calls[0][1], value
        assert streamed.tool_calls[0].arguments == held.tool_calls[0].arguments, value


def test_json_value_within_keeps_a_cut_escape() -> None:
    """`JsonValue.within` as `feed` scans: a lone last backslash escapes the next
    text's first character (here a quote, which then does not end the string)."""
    from toolwire.syntax.jsonscan import JsonValue

    value, scanned = JsonValue(), JsonValue()
    for text in ['"a', "b\\", '"c\\\\', "\\", "n", "d"]:
        if value.in_text:
            assert value.within(text), text
        else:
            value.feed(text)
        scanned.feed(text)
        assert (value.in_text, value.escape) == (scanned.in_text, scanned.escape), text
    assert not value.within('x" ')  # a bare quote ends it: not taken
    assert value.within("") and not value.done
    assert scanned.feed('"') == 1 and scanned.done
