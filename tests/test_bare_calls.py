"""Call bodies that stand alone, without their wrapper (`Format.bare`).

Models omit the wrapper: Qwen3-Coder writes `<function=NAME>...</function>` with no
`<tool_call>`, MiniMax M2 an `<invoke>` with no section. The rule is DeepSeek V4's for
its bare DSML invoke: such a body is provisional, held (even when streaming) and
returned only once it ended and names a declared tool; otherwise every character of
it is content, exactly. Its opener is text, not a token: a body copied from a tool
result looks exactly like one the model wrote, so recovering it gives up token-id
gating for these bodies. That is a visible policy: off by default (the format stays
gated, and such a body is content), on with `Parser(bare_calls=True)`, which then
says `gated` is False.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import cases
from toolwire import Message, Parser, formats
from toolwire.events import Event, merge
from toolwire.formats.spec import Format

BARE = [n for n in formats.names() if formats.get(n).bare is not None]
WEATHER = ("get_weather", {"city": "Paris", "days": 3})
PROSE, AFTER = "Let me check.", "Meanwhile, more."


def _bare(fmt: Format, call: tuple[str, dict[str, Any]]) -> str:
    """The call's body as the format writes it, without section or call delimiters."""
    block = cases.block(fmt, call)
    opener, closer = fmt.call
    if closer and block.startswith(opener) and block.endswith(closer):
        block = block[len(opener) : len(block) - len(closer)]
    assert fmt.bare is not None and block.strip().startswith(fmt.bare.opener)
    return block.strip()


def _events(name: str, ids: list[int], cuts: list[int], **options: Any) -> list[Event]:
    parser = Parser(name, cases.standalone_tokenizer(name), tools=cases.TOOLS, **options)
    out: list[Event] = []
    for a, b in zip([0, *cuts], [*cuts, len(ids)], strict=True):
        out += parser.feed(ids[a:b])
    return merge(out + parser.finish())


def _message(name: str, text: str, **options: Any) -> Message:
    """Parsed whole, one id per delta and split in two everywhere: all agree."""
    ids = cases.standalone_tokenizer(name).encode(text)
    whole = _events(name, ids, [], **options)
    assert _events(name, ids, list(range(1, len(ids))), **options) == whole
    for cut in range(1, len(ids)):
        assert _events(name, ids, [cut], **options) == whole, cut
    return Message.from_events(whole)


def test_formats_whose_bodies_stand_alone() -> None:
    assert set(BARE) == {"qwen3_coder", "seed_oss", "minimax_m2"}


@pytest.mark.parametrize("name", BARE)
def test_off_by_default_a_standalone_body_is_content_and_the_format_stays_gated(
    name: str,
) -> None:
    fmt, tok = formats.get(name), cases.standalone_tokenizer(name)
    assert Parser(name, tok).gated
    text = f"{PROSE}\n{_bare(fmt, WEATHER)}\n{AFTER}"
    msg = _message(name, text)
    assert (msg.tool_calls, msg.content) == ([], text)


@pytest.mark.parametrize("stream", [False, True], ids=["held", "stream"])
@pytest.mark.parametrize("name", BARE)
def test_recovered_a_closed_body_to_a_declared_tool_is_a_call(name: str, stream: bool) -> None:
    fmt, tok = formats.get(name), cases.standalone_tokenizer(name)
    assert not Parser(name, tok, bare_calls=True).gated  # the policy says so
    text = f"{PROSE}\n{_bare(fmt, WEATHER)}\n{AFTER}"
    msg = _message(name, text, bare_calls=True, stream_arguments=stream)
    assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [WEATHER]
    assert msg.content == f"{PROSE}\n{AFTER}"
    # and a wrapped call is still a call
    wrapped = fmt.render_output(content=PROSE, calls=[WEATHER])
    msg = _message(name, wrapped, bare_calls=True, stream_arguments=stream)
    assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [WEATHER]


@pytest.mark.parametrize("stream", [False, True], ids=["held", "stream"])
@pytest.mark.parametrize("name", BARE)
def test_recovered_anything_else_is_content_exactly(name: str, stream: bool) -> None:
    """Undeclared, unended, or only prose that names the opener: every character."""
    fmt = formats.get(name)
    assert fmt.bare is not None
    whole = _bare(fmt, WEATHER)
    end = cases.BODY_END[name]
    texts = [
        f"{PROSE}\n{_bare(fmt, ('not_declared', {'a': 'x'}))}\n{AFTER}",  # undeclared
        f"{PROSE}\n{whole[: whole.rindex(end)].rstrip()}",  # the body never ended
        f"{PROSE} The tag {fmt.bare.opener} opens a body. {AFTER}",  # prose
    ]
    for text in texts:
        msg = _message(name, text, bare_calls=True, stream_arguments=stream)
        assert (msg.tool_calls, msg.content) == ([], text)
