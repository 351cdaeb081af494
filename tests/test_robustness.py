"""No untyped exception, from model output or from a request, on every format.

Model output: a raw control character inside a JSON key or string, arguments nested
far beyond `nesting.MAX_DEPTH`, schemas of any shape (`"enum": 5`, `"type": [{...}]`)
give events (a malformed call is content) or `MalformedOutput` when strict. Requests:
every malformed one is a `PromptError` naming the field, every caller mistake a
`UsageError`, every unreadable tokenizer file a `UsageError` naming the file, and the
CLI says `toolwire: ...` and exits 2. Streamed calls say whether they completed.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest

from tests import cases
from tests.data import tokenizer_for
from toolwire import (
    MalformedOutput,
    Message,
    Parser,
    PromptError,
    UsageError,
    formats,
    load_tokenizer,
    render_prompt,
    structural_tag_with_reason,
)
from toolwire.cli import main
from toolwire.events import Event, ToolCallEnd
from toolwire.grammar.preflight import check
from toolwire.nesting import MAX_DEPTH, data_too_deep, json_too_deep

FORMATS = formats.names()

#: Tools whose schemas are malformed in the ways requests send them.
ODD_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"enum": 5},
                    "limit": {"anyOf": [{"enum": 5}, 7]},
                    "filters": {"type": [{"type": "object"}]},
                    "tags": 5,
                },
                "required": 5,
            },
        },
    }
]


def _deep(fmt: formats.Format, depth: int) -> str:
    """A call whose `filters` argument is `depth` nested lists, in the format's syntax."""
    text = fmt.render_output(calls=[("search", {"query": "x", "filters": "DEEPMARK"})])
    nested = "[" * depth + "]" * depth
    return re.sub(r'(<\|"\|>|"|\')?DEEPMARK(<\|"\|>|"|\')?', nested, text)


def _parse(name: str, ids: list[int], **options: Any) -> Message | None:
    """The message, or None when strict raised `MalformedOutput`; other errors propagate."""
    tok = cases.standalone_tokenizer(name)
    for cuts in ([], range(1, len(ids))):
        parser = Parser(name, tok, **options)
        events: list[Event] = []
        start = 0
        try:
            for cut in [*cuts, len(ids)]:
                events += parser.feed(ids[start:cut])
                start = cut
            events += parser.finish()
        except MalformedOutput:
            assert options.get("strict")
            return None
    return Message.from_events(events)


@pytest.mark.parametrize("name", FORMATS)
def test_malformed_model_output_is_content_or_malformed_output(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    outputs = {
        "tab in a key": fmt.render_output(calls=[("search", {"qu\tery": "x"})]),
        "newline in a key": fmt.render_output(calls=[("search", {"qu\nery": "x"})]),
        "nested 1000 deep": _deep(fmt, 1000),
        f"nested {MAX_DEPTH + 1} deep": _deep(fmt, MAX_DEPTH + 1),
    }
    for what, text in outputs.items():
        ids = tok.encode(text)
        for tools in (cases.TOOLS, ODD_TOOLS, None):
            for stream in (False, True):
                msg = _parse(name, ids, tools=tools, stream_arguments=stream)
                assert msg is not None, what
                for call in msg.tool_calls:
                    if call.valid:
                        assert isinstance(json.loads(call.arguments), dict), what
                _parse(name, ids, tools=tools, stream_arguments=stream, strict=True)


@pytest.mark.parametrize("name", FORMATS)
def test_nesting_within_the_limit_is_a_call_and_beyond_it_is_content(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    shallow = _parse(name, tok.encode(_deep(fmt, 20)), tools=cases.TOOLS)
    assert shallow is not None and [c.name for c in shallow.tool_calls] == ["search"]
    deep = _parse(name, tok.encode(_deep(fmt, 1000)), tools=cases.TOOLS)
    assert deep is not None
    for call in deep.tool_calls:  # typed formats keep a value that does not parse as text
        assert json.loads(call.arguments)["filters"] == "[" * 1000 + "]" * 1000
    if not deep.tool_calls:
        assert "[" * 1000 in (deep.content or "")


def _nested(rng: random.Random, depth: int) -> Any:
    """A JSON value whose strings hold brackets, quotes, escapes and line breaks."""
    if depth == 0 or rng.random() < 0.3:
        return "".join(rng.choice('ab{}[]"\\\n/') for _ in range(rng.randint(0, 12)))
    items = [_nested(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    if rng.random() < 0.5:
        return items
    return {f"k{i}{rng.choice('[{]}')}": item for i, item in enumerate(items)}


def test_the_text_depth_scan_agrees_with_the_parsed_value() -> None:
    """`json_too_deep` on JSON text says what `data_too_deep` says on its parse: brackets
    inside strings (escaped quotes, backslashes) never count, at every limit."""
    rng = random.Random(7)
    for _ in range(400):
        value = _nested(rng, rng.randint(0, 6))
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
        for limit in range(6):
            assert json_too_deep(text, limit) == data_too_deep(value, limit), (text, limit)


@pytest.mark.parametrize("name", ["qwen3_coder", "glm45", "glm47", "pythonic", "minimax_m2"])
def test_schemas_of_any_shape_type_nothing(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    text = fmt.render_output(calls=[("search", {"query": "3", "limit": 5, "filters": "x"})])
    msg = _parse(name, tok.encode(text), tools=ODD_TOOLS)
    assert msg is not None and [c.name for c in msg.tool_calls] == ["search"]


def test_prose_holding_json_with_a_raw_tab_is_content() -> None:
    tok = cases.standalone_tokenizer("llama3_json")
    text = 'Sure!\n{"a\tb": 1}\nbye'
    for strict in (False, True):
        msg = _parse("llama3_json", tok.encode(text), strict=strict)
        if msg is not None:
            assert msg.tool_calls == [] and msg.content == text


# -- stream_arguments: the end event says whether the arguments completed -----------


@pytest.mark.parametrize("name", FORMATS)
def test_a_streamed_call_says_whether_its_arguments_completed(name: str) -> None:
    fmt = formats.get(name)
    tok = cases.standalone_tokenizer(name)
    call = ("search", {"query": "a long query " * 20})
    whole = tok.encode(fmt.render_output(calls=[call]))
    complete = _parse(name, whole, tools=cases.TOOLS, stream_arguments=True)
    assert complete is not None and [c.valid for c in complete.tool_calls] == [True]
    cut = tok.encode(fmt.render_output(calls=[call]))[: len(whole) // 2]
    truncated = _parse(name, cut, tools=cases.TOOLS, stream_arguments=True)
    assert truncated is not None
    for streamed in truncated.tool_calls:
        assert not streamed.valid  # fragments stay as sent: not a JSON object
        with pytest.raises(ValueError):
            json.loads(streamed.arguments)
    held = _parse(name, cut, tools=cases.TOOLS)
    assert held is not None and held.tool_calls == []


def test_held_calls_always_end_valid() -> None:
    tok = cases.standalone_tokenizer("hermes")
    parser = Parser("hermes", tok, tools=cases.TOOLS)
    text = formats.get("hermes").render_output(calls=cases.CALLS)
    events = parser.feed(tok.encode(text)) + parser.finish()
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert len(ends) == len(cases.CALLS) and all(e.valid for e in ends)


# -- requests ------------------------------------------------------------------------


def _nest(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def _schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _tool(parameters: Any) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "f", "parameters": parameters}}]


_USER = {"role": "user", "content": "hi"}
_NONCHARACTERS = "".join(
    [chr(c) for c in range(0xFDD0, 0xFDF0)]
    + [chr(plane * 0x10000 + low) for plane in range(17) for low in (0xFFFE, 0xFFFF)]
)


def _with_arguments(arguments: str) -> list[dict[str, Any]]:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return [_USER, {"role": "assistant", "content": "", "tool_calls": [call]}]


BAD_REQUESTS: dict[str, tuple[dict[str, Any], str]] = {
    "lone surrogate": ({"messages": [{"role": "user", "content": "a\ud800b"}]}, "message 0"),
    "surrogate escape in arguments": (
        {"messages": _with_arguments('{"a": "\\udc00"}')},
        "message 1",
    ),
    "content nested 500 deep": (
        {"messages": [{"role": "user", "content": _nest(500)}]},
        "message 0",
    ),
    "extra field nested 500 deep": ({"messages": [{**_USER, "x": _nest(500)}]}, "message 0"),
    "arguments nested 500 deep": (
        {"messages": _with_arguments(json.dumps({"a": _nest(500)}))},
        "message 1",
    ),
    "tool schema nested 250 deep": ({"messages": [_USER], "tools": _tool(_schema(250))}, "tools"),
    "kwarg nested 500 deep": (
        {"messages": [_USER], "template_kwargs": {"enable_thinking": _nest(500)}},
        "template_kwargs.enable_thinking",
    ),
    "tools not a list": ({"messages": [_USER], "tools": 5}, "tools"),
    "kwargs not a mapping": ({"messages": [_USER], "template_kwargs": [1]}, "template_kwargs"),
    "template overflow": (
        {"messages": [_USER], "template": "{{ 'x' * 10**20 }}"},
        "refused before it is built",
    ),
    "template recursion": (
        {
            "messages": [_USER],
            "template": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        },
        "RecursionError",
    ),
    "template type error": (
        {"messages": [_USER], "template": "{{ messages[0].content + 1 }}"},
        "TypeError",
    ),
}


@pytest.mark.parametrize("what", BAD_REQUESTS)
def test_bad_requests_are_prompt_errors_naming_the_field(what: str) -> None:
    request, named = BAD_REQUESTS[what]
    tok = tokenizer_for("qwen3")
    with pytest.raises(PromptError, match=re.escape(named)):
        render_prompt(tokenizer=tok, **request)


def test_isolation_survives_a_request_holding_every_noncharacter() -> None:
    tok = tokenizer_for("qwen3")
    content = _NONCHARACTERS + "<tool_call>" + _NONCHARACTERS
    prompt = render_prompt([{"role": "user", "content": content}], tok)
    plain = render_prompt([{"role": "user", "content": "x"}], tok)
    assert content in prompt.text
    specials = [i for i in prompt.ids if i in tok.added_ids]
    assert specials == [i for i in plain.ids if i in tok.added_ids]


@pytest.mark.parametrize("name", FORMATS)
def test_structural_tags_never_raise_for_a_requests_schemas(name: str) -> None:
    tools = [
        *ODD_TOOLS,
        *(_tool(_schema(250))),
        {"type": "function", "function": {"name": "g", "parameters": {"type": [{"a": 1}]}}},
    ]
    for choice in ("auto", "required"):
        result = structural_tag_with_reason(name, tools, tool_choice=choice)
        if result.fallback != "unsupported_format":
            assert any("nested deeper" in r for r in result.reasons)


@pytest.mark.parametrize(
    "mistake",
    [
        lambda tok: Parser("qwen3", "path/to/tokenizer"),
        lambda tok: Parser(5, tok),
        lambda tok: render_prompt([_USER], None),
        lambda tok: render_prompt([_USER], tok, template=5),
        lambda tok: Parser("qwen3", tok).feed({}),
        lambda tok: Parser("qwen3", tok).feed({5: 1}),
        lambda tok: Parser("qwen3", tok).feed("abc"),
        lambda tok: Parser("qwen3", tok).feed(["a"]),
        lambda tok: Parser("qwen3", tok).feed([[1]]),
        lambda tok: Parser("qwen3", tok).feed([1.5]),
        lambda tok: Parser("qwen3", tok).feed_text(5),
        lambda tok: load_tokenizer(None),
    ],
)
def test_caller_mistakes_are_usage_errors(mistake: Any) -> None:
    with pytest.raises(UsageError):
        mistake(tokenizer_for("qwen3"))


def _corrupt(folder: Path, kind: str) -> Path:
    """A tokenizer folder broken in one way; returns the file to be named."""
    from tokenizers import Tokenizer as Backend
    from tokenizers import models

    valid = Backend(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")).to_str()
    folder.mkdir()
    if kind.startswith("config"):
        (folder / "tokenizer.json").write_text(valid)
        entry = '{"added_tokens_decoder": {"x": 5}}'
        (folder / "tokenizer_config.json").write_text("[1]" if "object" in kind else entry)
        return folder / "tokenizer_config.json"
    target = folder / ("tokenizer.json.gz" if "gzip" in kind else "tokenizer.json")
    data = {
        "not gzip (gzip)": b"plain text",
        "truncated gzip (gzip)": gzip.compress(valid.encode())[:-12],  # EOFError in gzip
        "not JSON": b"{not json",  # the tokenizers library raises a bare Exception
        "not UTF-8": b"\xff\xfe{}",
        "JSON but no tokenizer": b'{"a": 1}',
    }[kind]
    target.write_bytes(data)
    return target


CORRUPT = [
    "not gzip (gzip)",
    "truncated gzip (gzip)",
    "not JSON",
    "not UTF-8",
    "JSON but no tokenizer",
    "config is not an object",
    "config entry malformed",
]


@pytest.mark.parametrize("kind", CORRUPT)
def test_corrupt_tokenizer_files_are_usage_errors_naming_the_file(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "tok"
    named = _corrupt(folder, kind)
    with pytest.raises(UsageError, match=re.escape(str(named))):
        load_tokenizer(folder)
    assert main(["parse", "--format", "hermes", "--tokenizer", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("toolwire: ") and str(named) in err


def test_ids_without_text_decode_to_nothing_in_either_detokenizer() -> None:
    """Byte-level vocabularies use a table, others `DecodeStream`: the same rule."""
    from tokenizers import Tokenizer as Backend
    from tokenizers import models, pre_tokenizers

    from toolwire import Tokenizer

    words = Backend(models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    for tok in (Tokenizer(words), tokenizer_for("qwen3")):
        a = tok.encode("a")
        for ids in ([-1, *a], [*a, 10**12], [10**30, *a]):
            parser = Parser("hermes", tok)
            assert Message.from_events(parser.feed(ids) + parser.finish()).content == "a"
        with pytest.raises(UsageError):
            Parser("hermes", tok).feed([1.5])


_ODD_VALUES: list[Any] = [5, "x", None, True, [], {}, [{"a": 1}], [5], -1.5, ["string", 5]]
_KEYWORDS = ["type", "properties", "items", "enum", "anyOf", "oneOf", "allOf", "required",
             "pattern", "const", "additionalProperties", "minimum", "maxLength", "format",
             "prefixItems", "$ref", "$defs", "default"]  # fmt: skip


_TYPES: list[Any] = ["object", "string", "integer", "array", "null", "dict", "any", 5,
                     [{"a": 1}], ["string", "null"], [], None]  # fmt: skip


def _random_schema(rng: random.Random, depth: int = 0) -> Any:
    """A schema of any shape: right and wrong values for JSON Schema's keywords."""
    if depth > 3 or rng.random() < 0.2:
        return rng.choice(_ODD_VALUES)
    schema: dict[str, Any] = {}
    for _ in range(rng.randint(0, 4)):
        key = rng.choice(_KEYWORDS)
        if key == "properties" and rng.random() < 0.8:
            names = ["a", "b c", "<x>"]
            schema[key] = {rng.choice(names): _random_schema(rng, depth + 1) for _ in range(2)}
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and rng.random() < 0.8:
            schema[key] = [_random_schema(rng, depth + 1) for _ in range(rng.randint(0, 3))]
        elif key in ("items", "additionalProperties"):
            schema[key] = _random_schema(rng, depth + 1)
        elif key == "type":
            schema[key] = rng.choice(_TYPES)
        elif key == "pattern":
            schema[key] = rng.choice(["(?=a)b", "[", 5, "(?<!x"])
        else:
            schema[key] = rng.choice(_ODD_VALUES)
    return schema


def test_structural_tags_take_schemas_of_any_shape() -> None:
    """Random schemas, right and wrong, on every format: a tag or None, never an error.

    A tag is a structural tag that is JSON and compiles (XGrammar, when installed);
    None comes with its fallback code and reasons; a forced call (`required`, a named
    tool) on a format that has tags always gets one (the schema relaxed if need be)."""
    rng = random.Random("schemas")
    plain = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    tagged = {
        n for n in FORMATS if structural_tag_with_reason(n, plain, tool_choice="required").tag
    }
    assert len(tagged) > len(FORMATS) // 2, tagged
    for _ in range(int(os.environ.get("TOOLWIRE_FUZZ", "120")) // 5):
        tools = [
            {"type": "function", "function": {"name": "f", "parameters": _random_schema(rng)}},
            {
                "type": "function",
                "function": {
                    "name": "g",
                    "strict": rng.choice([True, False, None, 5]),
                    "parameters": {"type": "object", "properties": {"a": _random_schema(rng)}},
                },
            },
        ]
        for name in FORMATS:
            named = {"type": "function", "function": {"name": "f"}}
            choice = rng.choice(["auto", "required", named])
            result = structural_tag_with_reason(name, tools, tool_choice=choice)
            if result.tag is None:
                assert result.fallback is not None and result.reasons, (name, tools)
                assert choice == "auto" or name not in tagged, (name, choice, result)
                continue
            assert result.tag["type"] == "structural_tag", (name, result.tag)
            json.dumps(result.tag, allow_nan=False)
            assert check(result.tag) is None, (name, tools, check(result.tag))


_ODD_DATA: list[Any] = [None, 5, -1, 1.5, True, "", "<|im_start|>", "<tool_call>", [], {},
                        [1], {"a": 1}, [{"type": "image"}], [{"type": "text", "text": 5}],
                        "\ufdd0", float("nan"), 10**30]  # fmt: skip
_FIELDS = ["name", "tool_calls", "content", "role", "reasoning_content", "function",
           "arguments", "tool_call_id"]  # fmt: skip


def _damage(value: Any, rng: random.Random, depth: int = 0) -> Any:
    """`value` with a few parts replaced by data of the wrong shape."""
    if depth > 6:
        return value
    if rng.random() < 0.1:
        return rng.choice(_ODD_DATA)
    if isinstance(value, dict):
        value = dict(value)
        if value and rng.random() < 0.3:
            key = rng.choice(list(value))
            value[key] = _damage(value[key], rng, depth + 1)
        if rng.random() < 0.1:
            value[rng.choice(_FIELDS)] = rng.choice(_ODD_DATA)
        if value and rng.random() < 0.1:
            del value[rng.choice(list(value))]
    elif isinstance(value, list):
        value = list(value)
        if value and rng.random() < 0.5:
            at = rng.randrange(len(value))
            value[at] = _damage(value[at], rng, depth + 1)
        if rng.random() < 0.1:
            value.append(rng.choice(_ODD_DATA))
    return value


def test_damaged_requests_raise_only_typed_errors() -> None:
    """Real conversations with parts of the wrong shape, on every template of the shared
    data: a prompt, or `PromptError`/`UsageError` (the template's own TypeErrors on
    data it did not expect included)."""
    from tests.prompt_cases import CONVERSATIONS, TEMPLATES, TOOLS, template_text
    from tests.test_prompt_isolation import family_tokenizer
    from toolwire import ToolwireError

    rng = random.Random("requests")
    templates = [(family, name) for family, entries in TEMPLATES.items() for name, _ in entries]
    kwargs = {"enable_thinking": True, "model_identity": "x", "thinking": False}
    for _ in range(int(os.environ.get("TOOLWIRE_FUZZ", "120"))):
        family, name = rng.choice(templates)
        messages, _ = rng.choice(list(CONVERSATIONS.values()))
        tools = _damage(TOOLS, rng) if rng.random() < 0.7 else rng.choice(_ODD_DATA)
        with contextlib.suppress(ToolwireError):
            render_prompt(
                _damage(messages, rng),
                family_tokenizer(family),
                tools=tools,
                template=template_text(family, name),
                template_kwargs=_damage(kwargs, rng) if rng.random() < 0.3 else None,
            )
