"""The machine over every state x every delimiter role x every format (as h2 tests its
stream states).

For each registered format, a prefix drives a parser into each state the format has
(content, reasoning, a section, a call inside it or standing alone, a message
header); then each delimiter of each role the format names (`Format`: reasoning,
section, call, marks, header, anchor) is fed, by its token id and spelled from
ordinary ids, with generated text and whitespace around it and, sometimes, a whole
call after it. Whatever the input, these hold:

* chunk invariance: any split of the ids into deltas merges to the one-delta events;
* nothing raises, and `finish` returns; with `strict=True` the only error is
  `MalformedOutput`;
* conservation: when nothing became a call, content and reasoning together are the
  decoded output with only markup taken out (whole delimiters and special tokens,
  message headers, whitespace), every other character kept in order.

The transition table itself has an explicit entry for every (state, role) pair, and
the machine goes where it says: each delimiter, in each state, leaves the parser in a
state the table names for that entry.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import cases
from toolwire import MalformedOutput, Parser, Tokenizer, formats
from toolwire.events import (
    Content,
    Event,
    Reasoning,
    ToolCallArguments,
    ToolCallBegin,
    ToolCallEnd,
    merge,
)
from toolwire.formats.spec import Format
from toolwire.lexicon import (
    TRANSITIONS,
    TRIGGERED,
    Action,
    Mode,
    Role,
    State,
    Then,
    Transition,
    Trigger,
    lexicon,
    tables,
)
from toolwire.parser import ParserStats

FORMATS = formats.names()
CALL = ("get_weather", {"city": "Paris", "days": 3})
REASONING = "Thinking it over"
CONTENT = "Hello there."


def roles(fmt: Format) -> dict[str, tuple[str, ...]]:
    """Each delimiter role the format names -> its delimiters (from the spec alone)."""
    header, anchor = fmt.header, fmt.anchor
    found = {
        "reasoning.open": tuple(o for o, _ in fmt.reasoning_pairs),
        "reasoning.close": tuple(c for _, c in fmt.reasoning_pairs),
        "section.open": fmt.section[:1] if fmt.section else (),
        "section.close": fmt.section[1:] if fmt.section else (),
        "call.open": (fmt.call[0],),
        "call.close": (fmt.call[1] or "",),
        "mark": (*fmt.marks, *(header.marks if header else ())),
        "header.open": header.opens if header else (),
        "header.close": header.closes if header else (),
        "header.end": header.ends if header else (),
        "anchor.after": anchor.after if anchor else (),
    }
    return {role: tuple(d for d in ds if d) for role, ds in found.items() if any(ds)}


def prefixes(fmt: Format) -> dict[str, str]:
    """Output text that leaves the parser in each state the format has (cut from what
    the format's own renderer writes)."""
    # Cut inside content as the format writes it (bare, or in Inkling's text block,
    # where the output begins inside a header).
    alone = fmt.render_output(content=CONTENT)
    out = {"content": alone[: alone.index(CONTENT) + len(CONTENT)]}
    if fmt.reasoning_pairs or fmt.header is not None:
        whole = fmt.render_output(reasoning=REASONING, content=CONTENT)
        out["reasoning"] = whole[: whole.index(REASONING) + len(REASONING) // 2]
    call = fmt.render_output(content=CONTENT, calls=[CALL])
    inside = call.index("Paris") - 1  # inside the call's body
    out["call"] = call[:inside]
    if fmt.section is not None:
        opener = call.index(fmt.section[0]) + len(fmt.section[0])
        body = call[opener:].lstrip()
        first = next((d for d in (fmt.call[0], *fmt.marks) if d and d in body), "")
        out["section"] = call[: call.index(body)] + (body[: body.index(first)] if first else "")
        if fmt.loose_calls:  # a call standing alone, provisionally
            out["loose call"] = CONTENT + "\n" + body[: body.index("Paris") - 1]
    if fmt.header is not None:
        opener = fmt.header.opens[0]
        at = call.find(opener)  # Inkling writes no opener before its first block
        out["header"] = call[: at + len(opener) + 3] if at >= 0 else opener + "get"
    return out


#: The state each prefix is meant to reach (checked once, so no case is vacuous).
EXPECTED = {
    "content": State.CONTENT,
    "reasoning": State.REASONING,
    "call": State.CALL,
    "loose call": State.CALL,
    "section": State.SECTION,
    "header": State.HEADER,
}


def _tok(name: str) -> Tokenizer:
    return cases.standalone_tokenizer(name)  # the machine holds on any vocabulary


@cache
def combos(name: str) -> tuple[tuple[str, str, str], ...]:
    """Every (state prefix, role, delimiter) of a format, and each state with text only
    (all a format without delimiters has: pythonic)."""
    fmt = formats.get(name)
    return tuple(
        (state, role, delimiter)
        for state in prefixes(fmt)
        for role, delimiters in {"text": ("",), **roles(fmt)}.items()
        for delimiter in delimiters
    )


def _events(parser: Parser, chunks: Sequence[Sequence[int]]) -> list[Event]:
    out: list[Event] = []
    for chunk in chunks:
        out += parser.feed(list(chunk))
    out += parser.finish()
    return merge(out)


def _parsed(parser: Parser, chunks: Sequence[Sequence[int]]) -> tuple[list[Event], ParserStats]:
    """The merged events, and what the parser says it saw."""
    return _events(parser, chunks), parser.stats


def _run(name: str, ids: list[int], cuts: Sequence[int], stream: bool) -> list[Event]:
    """Parse `ids` whole, one id at a time and split at `cuts`: all three must agree.
    Then strict: the same, or `MalformedOutput`."""
    tok = _tok(name)
    options: dict[str, Any] = {"tools": cases.TOOLS, "stream_arguments": stream}
    whole = _parsed(Parser(name, tok, **options), [ids])
    single = _parsed(Parser(name, tok, **options), [[i] for i in ids])
    points = sorted({0, len(ids), *(c % (len(ids) + 1) for c in cuts)})
    split = _parsed(Parser(name, tok, **options), [ids[a:b] for a, b in itertools.pairwise(points)])
    assert single == whole, "one id per delta differs from one delta (events or stats)"
    # A delimiter's sentinel (a lone surrogate) never leaves the parser: where a token
    # does not act (say `</think>` inside a call body) it is the token's text.
    assert not _SENTINEL.search(repr(whole[0])), whole[0]
    assert split == whole, f"split at {points} differs from one delta (events or stats)"
    try:
        strict = _events(Parser(name, tok, strict=True, **options), [ids])
    except MalformedOutput:
        pass
    else:
        assert strict == whole[0]
    return whole[0]


_SPACE = re.compile(r"\s+")
#: A lone surrogate as `repr` writes it.
_SENTINEL = re.compile(r"\\ud[89a-f][0-9a-f]{2}")


def _markup(fmt: Format, tok: Tokenizer, ids: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """The decoded output, and the spans of it that markup may take out: each added
    token (a delimiter's or a special token), each whole delimiter holding one (or
    matched as text, where it has none), a message header from its opener on."""
    lex = lexicon(fmt, tok)
    plain = set(fmt.delimiters) if lex.gated_forms is None else set(lex.plain)
    added = tok.added_ids
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    run: list[int] = []
    size = 0
    for token in [*ids, -1]:
        if token != -1 and token not in added:
            run.append(token)
            continue
        if run:
            parts.append(tok.decode(run))
            size += len(parts[-1])
            run.clear()
        if token != -1:
            parts.append(tok.decode([token]))
            spans.append((size, size + len(parts[-1])))
            size += len(parts[-1])
    text = "".join(parts)
    tokens = list(spans)
    # An inner mark is text wherever no call took it (one that is also another
    # delimiter may act as that one).
    header_marks = header.marks if (header := fmt.header) is not None else ()
    marks = set(fmt.marks + header_marks) - {
        d for d in fmt.delimiters if d not in (*fmt.marks, *header_marks)
    }
    kept = [m.span() for mark in marks for m in re.finditer(re.escape(mark), text)]
    spans = [(a, b) for a, b in spans if not any(s <= a and b <= e for s, e in kept)]
    for delimiter in set(fmt.delimiters) - marks:
        for found in re.finditer(re.escape(delimiter), text):
            a, b = found.span()
            if delimiter in plain or any(a <= s < b for s, _ in tokens):
                spans.append((a, b))
    if header is not None:  # header marks are header text: markup
        opens = [a for a, b in spans if text[a:b] in header.opens]
        for a in opens:
            ends = [b for s, b in spans if s > a and text[s:b] in (*header.closes, *header.ends)]
            spans.append((a, min(ends) if ends else len(text)))
    return text, spans


def _conserved(output: str, text: str, spans: list[tuple[int, int]]) -> bool:
    """`output` is `text` with some of `spans` taken out, every other character kept in
    order (whitespace ignored: at the edges of runs it is markup)."""
    target = _SPACE.sub("", output)
    jumps: dict[int, set[int]] = {}
    for a, b in spans:
        jumps.setdefault(a, set()).add(b)
    reach: list[set[int]] = [set() for _ in range(len(text) + 1)]
    reach[0].add(0)
    for pos, char in enumerate(text):
        here = reach[pos]
        if not here:
            continue
        for b in jumps.get(pos, ()):
            reach[b] |= here
        if char.isspace():
            reach[pos + 1] |= here
        else:
            reach[pos + 1] |= {t + 1 for t in here if t < len(target) and target[t] == char}
    return len(target) in reach[len(text)]


def _check(name: str, ids: list[int], cuts: Sequence[int], stream: bool) -> None:
    events = _run(name, ids, cuts, stream)
    if any(isinstance(e, ToolCallBegin) for e in events):
        assert any(isinstance(e, ToolCallEnd) for e in events)
        return  # structure: conservation is the invariant suite's, per call
    assert not any(isinstance(e, ToolCallArguments) for e in events)
    output = "".join(e.text for e in events if isinstance(e, Content | Reasoning))
    fmt, tok = formats.get(name), _tok(name)
    text, spans = _markup(fmt, tok, ids)
    assert _conserved(output, text, spans), (output, text)


def _ids(
    name: str, state: str, delimiter: str, genuine: bool, around: tuple[str, str]
) -> list[int]:
    fmt, tok = formats.get(name), _tok(name)
    lead, trail = around
    return (
        tok.encode(prefixes(fmt)[state])
        + tok.encode(lead, delimiters=False)
        + tok.encode(delimiter, delimiters=genuine)
        + tok.encode(trail, delimiters=False)
    )


# -- the table -----------------------------------------------------------------------


def test_every_state_and_role_has_an_entry() -> None:
    assert set(TRANSITIONS) == {(state, role) for state in State for role in Role}


@pytest.mark.parametrize("name", FORMATS)
def test_every_delimiter_is_searched_for_outside_a_call(name: str) -> None:
    """None is silently text in a section: each is markup, text or structure there."""
    fmt, tok = formats.get(name), _tok(name)
    for mode in Mode:
        t = tables(fmt, tok, mode)
        assert {t.forms[d] for d in fmt.delimiters} <= set(t.roles[State.SECTION])


def _resume_of(fmt: Format, prefix: str) -> dict[State, State]:
    """Where each structure a prefix opened began (what `Then.RESUME` names): a call
    rendered in its section began there, any other call and every section in content."""
    inside = prefix == "call" and fmt.section is not None
    return {State.CALL: State.SECTION if inside else State.CONTENT, State.SECTION: State.CONTENT}


def _named(
    t: Any, state: State, form: str, resume: dict[State, State], section: bool, depth: int = 0
) -> set[State]:
    """The states the table names for `form` matched in `state`: each outcome's
    destination (`Then` resolved: RESUME where the structure began, OUTER the open
    section or content), followed where the delimiter acts again."""
    role = t.roles[state].get(form)
    if role is None:  # not searched here: text, and the state stays, unless a body
        if state is not State.CALL:  # that ends itself ended on it (a body's own end)
            return {state}
        step = TRIGGERED[State.CALL, Trigger.BODY_END]
        return {state} | _named_by(t, step, state, form, resume, section, depth)
    return _named_by(t, TRANSITIONS[state, role], state, form, resume, section, depth)


def _named_by(
    t: Any,
    step: Transition,
    state: State,
    form: str,
    resume: dict[State, State],
    section: bool,
    depth: int,
) -> set[State]:
    found: set[State] = set()
    for outcome, to in step.to.items():
        open_section = section and step.action is not Action.CLOSE_SECTION
        if to is Then.RESUME:
            to = resume[state]
        elif to is Then.OUTER:
            to = State.SECTION if section else State.CONTENT
        if outcome in step.again and depth < 3:
            found |= _named(t, to, form, resume, open_section, depth + 1)
        else:
            found.add(to)
    return found


@pytest.mark.parametrize("name", FORMATS)
def test_every_delimiter_leaves_the_state_the_table_names(name: str) -> None:
    """Each delimiter, by id, in each state a format reaches: the machine ends where
    `TRANSITIONS` says, for whichever outcome its action had (no handler decides a
    destination). Most entries name one state; those that name several (a call that
    is returned or released, a header's route) are held to the states they name."""
    fmt, tok = formats.get(name), _tok(name)
    t = tables(fmt, tok, Mode.IDS)
    checked = exact = 0
    states = prefixes(fmt)
    closer = fmt.call[1]
    if closer:  # and a whole call but its closer: one that is returned
        whole = fmt.render_output(content=CONTENT, calls=[CALL])
        states["call"] = whole[: whole.rindex(closer)]
    for prefix, text in states.items():
        for delimiters in roles(fmt).values():
            for delimiter in delimiters:
                parser = Parser(name, tok, tools=cases.TOOLS)
                parser.feed(tok.encode(text))
                before = parser.state
                form = t.forms[delimiter]
                longer = [p for p in t.roles[before] if p != form and p.startswith(form)]
                if longer:  # a prefix of a longer delimiter waits for what follows
                    continue
                named = _named(
                    t,
                    before,
                    form,
                    _resume_of(fmt, prefix),
                    fmt.section is not None and prefix in ("call", "section"),
                )
                parser.feed(tok.encode(delimiter))
                assert parser.state in named, (prefix, delimiter, before, parser.state, named)
                checked += 1
                exact += len(named) == 1
    assert checked or not roles(fmt)  # pythonic names no delimiter
    assert exact * 2 >= checked, (checked, exact)  # most entries name one state


# -- the machine, every state x role x format -----------------------------------------


@pytest.mark.parametrize("name", FORMATS)
def test_prefixes_reach_their_states(name: str) -> None:
    fmt, tok = formats.get(name), _tok(name)
    for state, text in prefixes(fmt).items():
        parser = Parser(name, tok, tools=cases.TOOLS)
        parser.feed(tok.encode(text))
        # A prefix that misses its state would test nothing.
        assert parser.state is EXPECTED[state], (state, text)


@pytest.mark.parametrize("name", FORMATS)
def test_every_state_and_role_by_id_and_spelled(name: str) -> None:
    """Each delimiter, bare and between text, in each state: by id and spelled."""
    for state, _role, delimiter in combos(name):
        for genuine in (True, False):
            for around in (("", ""), (" x ", "\ny ")):
                ids = _ids(name, state, delimiter, genuine, around)
                _check(name, ids, (len(ids) // 2,), stream=False)


_TEXT = st.text(alphabet=' \n\tab<>[]{}":=,|/', max_size=6)


@st.composite
def machine_inputs(draw: st.DrawFn) -> tuple[str, list[int], list[int], bool]:
    name = draw(st.sampled_from(FORMATS))
    state, _role, delimiter = draw(st.sampled_from(combos(name)))
    genuine = draw(st.booleans())
    ids = _ids(name, state, delimiter, genuine, (draw(_TEXT), draw(_TEXT)))
    if draw(st.booleans()):  # and what may follow: a whole call
        ids += _tok(name).encode("\n" + formats.get(name).render([CALL]))
    cuts = draw(st.lists(st.integers(min_value=0, max_value=len(ids)), max_size=4))
    return name, ids, cuts, draw(st.booleans())


@settings(max_examples=max(50, settings.default.max_examples * 2))
@given(machine_inputs())
def test_machine_invariants(case: tuple[str, list[int], list[int], bool]) -> None:
    name, ids, cuts, stream = case
    _check(name, ids, cuts, stream)


# -- what the parser reports ----------------------------------------------------------


@pytest.mark.parametrize("name", FORMATS)
def test_stats_count_echoes_and_released_calls(name: str) -> None:
    """Every opening delimiter spelled from ordinary ids is an echo where the format is
    gated (and nothing where it is not); a call to an undeclared tool is released."""
    fmt, tok = formats.get(name), _tok(name)
    echoed = fmt.render([CALL])
    spelled = tok.encode(CONTENT + "\n" + echoed, delimiters=False)
    undeclared = tok.encode(fmt.render_output(content=CONTENT, calls=[("nope", {})]))
    parser = Parser(name, tok, tools=cases.TOOLS)
    events = _events(parser, [[i] for i in spelled + undeclared])
    gated = parser.gated
    entries = sum(echoed.count(e) for e in fmt.entries if e) if gated else 0
    assert parser.stats.echoes == entries
    assert entries > 0 or not gated
    if gated:  # spelled markup is text; the undeclared call is released
        assert not any(isinstance(e, ToolCallBegin) for e in events)
        assert parser.stats.released_calls == 1
