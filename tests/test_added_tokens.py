"""Added tokens that are not the format's delimiters are text wherever they stand,
unless the vocabulary flags them special (`toolwire.lexicon`'s rule).

A vocabulary's added tokens are of two kinds: special ones (`Tokenizer.special_ids`:
turn markers, end of text), dropped wherever they stand (docs/parser.md, guarantee 5), and
the others (Qwen's `<tool_response>`, `<|fim_prefix|>`, DeepSeek's `<｜User｜>`, and,
in the synthetic vocabulary, every other family's delimiters), which are text: in
content, in reasoning, in an argument value of a returned call, and in a call or a
section released as content (released structure is the decoding of its ids, less
the special tokens that are no delimiter). Every format is tested on its own test
vocabulary where that has such a token, and on the synthetic vocabulary, which always
has some.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests import cases
from tests.vocabulary import synthetic_tokenizer
from toolwire import Message, Parser, Tokenizer, formats
from toolwire.events import merge
from toolwire.formats.spec import Format
from toolwire.lexicon import lexicon

FORMATS = formats.names()
#: Characters no string value of every syntax can hold unescaped.
_QUOTES = set("\"'\\`")


def _vocabulary(which: str, name: str) -> Tokenizer:
    return synthetic_tokenizer() if which == "synthetic" else cases.standalone_tokenizer(name)


def _plain_added(fmt: Format, tok: Tokenizer) -> str | None:
    """An added token of `tok` that is not special and is none of the format's
    delimiters' tokens, whose text neither holds nor stands inside a delimiter (so it
    can only be text here), and that a string value can hold as it is."""
    own = {i for d in (*fmt.delimiters, *fmt.keep) for i in tok.encode(d) if i in tok.added_ids}
    texts = [*fmt.delimiters, "<function=", "<parameter=", "</parameter>", "</function>"]
    for text, token in sorted(tok.added_tokens.items(), key=lambda item: item[1]):
        if token in tok.special_ids or token in own or _QUOTES & set(text):
            continue
        if any(d and (d in text or text in d) for d in texts) or "=" in text:
            continue
        if tok.encode(text) == [token]:
            return text
    return None


def _message(name: str, tok: Tokenizer, ids: list[int], **options: Any) -> Message:
    whole = Parser(name, tok, tools=cases.TOOLS, **options)
    events = merge(whole.feed(ids) + whole.finish())
    single = Parser(name, tok, tools=cases.TOOLS, **options)
    one_by_one = [e for i in ids for e in single.feed([i])]
    assert merge(one_by_one + single.finish()) == events  # and chunk invariant
    return Message.from_events(events)


@pytest.mark.parametrize("which", ["test", "synthetic"])
@pytest.mark.parametrize("name", FORMATS)
def test_an_added_token_that_is_not_special_is_text_everywhere(name: str, which: str) -> None:
    fmt, tok = formats.get(name), _vocabulary(which, name)
    token = _plain_added(fmt, tok)
    if token is None:
        pytest.skip(f"{which} vocabulary: every added token is special or a delimiter here")
    for stream in (False, True):
        # content
        text = f"Hello {token} world."
        msg = _message(name, tok, tok.encode(fmt.render_output(content=text)))
        assert msg.content == text
        # reasoning
        if fmt.reasoning is not None or fmt.render_text is not None:
            plan = f"Plan {token} more."
            output = fmt.render_output(reasoning=plan, content="Done.")
            msg = _message(name, tok, tok.encode(output), stream_arguments=stream)
            assert (msg.reasoning, msg.content) == (plan, "Done.")
        # an argument value of a returned call: the value unchanged
        value = f"a{token}b"
        call = ("search", {"query": value})
        msg = _message(
            name, tok, tok.encode(fmt.render_output(calls=[call])), stream_arguments=stream
        )
        assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [call]
        assert msg.content is None
        # a released call (an undeclared tool): every character, the token included
        ids = tok.encode(
            fmt.render_output(content="Hi.", calls=[("not_declared", {"query": value})])
        )
        msg = _message(name, tok, ids, stream_arguments=stream)
        assert msg.tool_calls == []
        assert msg.content is not None and value in msg.content
        if fmt.header is None and fmt.render_text is None:  # no content markup: exact
            dropped = lexicon(fmt, tok).drop  # special tokens that are no delimiter
            assert msg.content == tok.decode([i for i in ids if i not in dropped]).strip()


@pytest.mark.parametrize("name", ["hermes", "qwen3"])
def test_a_qwen_tool_response_token_in_a_value_is_kept(name: str) -> None:
    """The sample: `<tool_response>` (151665, added, not special) inside a value."""
    tok = cases.tokenizer(name)
    assert not tok.is_special(tok.added_tokens["<tool_response>"])
    text = (
        '<tool_call>\n{"name": "undeclared_x", "arguments": {"city": "a<tool_response>b"}}'
        "\n</tool_call>"
    )
    ids = tok.encode(text)
    assert tok.added_tokens["<tool_response>"] in ids
    msg = _message(name, tok, ids)
    assert (msg.content, msg.tool_calls) == (text, [])
    declared = {"type": "function", "function": {"name": "undeclared_x", "parameters": {}}}
    parser = Parser(name, tok, tools=[declared])
    got = Message.from_events(parser.feed(ids) + parser.finish())
    assert [json.loads(c.arguments) for c in got.tool_calls] == [{"city": "a<tool_response>b"}]


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@pytest.mark.parametrize("name", [n for n in FORMATS if formats.get(n).marks])
@pytest.mark.parametrize("stream", [False, True], ids=["held", "stream"])
def test_a_calls_mark_where_a_value_stands_leaves_as_its_text(name: str, stream: bool) -> None:
    """A call's inner mark keeps its structural form inside the body (its syntax reads
    it); where the syntax takes it as a value's text (inside a string, or where a value
    was due) it leaves the parser as the token's text, never as its sentinel: in a
    returned call's arguments and name, held or streamed, and in released text."""
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    for mark in fmt.marks:
        for value in (f"a{mark}b", mark):
            output = "Checking.\n\n" + fmt.render([("get_weather", {"city": value})])
            ids = tok.encode(output)
            message = _message(name, tok, ids, stream_arguments=stream)
            texts = [message.content or "", message.reasoning or ""]
            texts += [t for c in message.tool_calls for t in (c.name, c.arguments)]
            assert not any(_LONE_SURROGATE.search(t) for t in texts), (mark, message)
