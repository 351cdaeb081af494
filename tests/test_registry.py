"""The format registry: custom formats beside the built-ins, `is_gated`, and aliases."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from toolwire import Parser, UsageError, formats, parse, render_prompt, structural_tag
from toolwire.cli import main
from toolwire.tokenizer import Tokenizer

# Runs in a fresh interpreter: the registry must not have been looked up before.
_CUSTOM_FIRST = textwrap.dedent(
    """
    from toolwire import formats
    from toolwire.formats.spec import Format
    from toolwire.syntax.json_envelope import JsonEnvelope

    formats.register(Format(
        name="my_tags",
        call=("<call>", "</call>"),
        syntax=JsonEnvelope,
        render=lambda calls: "",
    ))
    names = formats.names()
    assert "my_tags" in names, names
    assert "hermes" in names and "qwen3" in names, names
    print(len(names))
    """
)


def test_a_custom_format_registered_first_keeps_every_builtin() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CUSTOM_FIRST], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(formats.names()) + 1


@pytest.mark.parametrize("name", formats.names())
@pytest.mark.parametrize("family", ["qwen3", "deepseek_v3"])
def test_is_gated_says_what_the_parser_says(
    name: str, family: str, load: Callable[[str], Tokenizer]
) -> None:
    tok = load(family)
    assert formats.is_gated(name, tok) == Parser(name, tok).gated
    assert formats.is_gated(formats.get(name), tok) == Parser(name, tok).gated
    assert formats.is_gated(name, None) is False


# -- aliases ----------------------------------------------------------------------

#: The names users know, as the registry must accept them (alias -> canonical).
MODEL_NAMES = {
    "glm5": "glm47",
    "glm51": "glm47",
    "kimi_k25": "kimi_k2",
    "kimi_k26": "kimi_k2",
    "minimax_m25": "minimax_m2",
    "minimax_m27": "minimax_m2",
    "qwen35": "qwen3_coder",
    "qwen36": "qwen3_coder",
    "nemotron3": "qwen3_coder",
    "nemotron_v3": "qwen3_coder",
    "mimo": "qwen3_coder",
    "hermes4": "qwen3",
    "qwen25": "hermes",
}

#: Peers' parser names (vLLM's registries, SGLang's detector table) -> toolwire's format;
#: SGLang's spellings differ from toolwire's names only by separators.
PEER_NAMES = {
    "qwen3_xml": "qwen3_coder",
    "step3p5": "qwen3_coder",
    "minimax_m2_append_think": "minimax_m2",
    "openai": "gpt_oss",
    "llama4_json": "llama3_json",
    "llama4_pythonic": "llama4",
    "deepseekv3": "deepseek_v3",
    "deepseekv31": "deepseek_v31",
    "deepseekv32": "deepseek_v32",
    "deepseekv4": "deepseek_v4",
    "glm": "glm45",
    "gpt-oss": "gpt_oss",
    "minimax-m2": "minimax_m2",
    "llama3": "llama3_json",
    "qwen": "hermes",
    "apertus2509": "apertus",
    "interns1": "internlm",
}


def test_aliases_name_registered_formats_and_names_lists_canonical_ones_only() -> None:
    aliases = formats.aliases()
    assert aliases and set(aliases.values()) <= set(formats.names())
    assert not set(aliases) & set(formats.names())
    for alias, canonical in aliases.items():
        assert formats.get(alias) is formats.get(canonical)
        assert formats.get(alias).name == canonical


@pytest.mark.parametrize(("alias", "canonical"), sorted({**MODEL_NAMES, **PEER_NAMES}.items()))
def test_model_and_peer_names_resolve(alias: str, canonical: str) -> None:
    assert formats.get(alias) is formats.get(canonical)


@pytest.mark.parametrize(
    ("spelled", "canonical"),
    [("GLM-5.1", "glm47"), ("Qwen3.5", "qwen3_coder"), ("Kimi-K2.6", "kimi_k2"),
     ("HERMES", "hermes"), ("deepseek-v3.1", "deepseek_v31"), ("MiniMax M2.7", "minimax_m2")],
)  # fmt: skip
def test_names_ignore_case_and_separators(spelled: str, canonical: str) -> None:
    assert formats.get(spelled) is formats.get(canonical)


def test_an_unknown_name_lists_names_and_aliases() -> None:
    with pytest.raises(UsageError, match=r"unknown format 'glm9'.*hermes.*aliases:.*glm5"):
        formats.get("glm9")
    with pytest.raises(UsageError, match="unknown format"):
        formats.get(None)  # type: ignore[arg-type]


def test_an_alias_works_wherever_a_format_name_does(load: Callable[[str], Tokenizer]) -> None:
    tok = load("qwen3")
    assert Parser("qwen25", tok).format is formats.get("hermes")
    ids = tok.encode('<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>')
    assert parse("Qwen2.5", tok, ids).tool_calls[0].arguments == '{"a": 1}'
    messages = [{"role": "user", "content": "hi"}]
    assert render_prompt(messages, tok, format="qwen35").ids
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    by_alias = structural_tag("qwen35", tools, tool_choice="required", tokenizer=tok)
    assert by_alias is not None
    assert by_alias == structural_tag("qwen3_coder", tools, tool_choice="required", tokenizer=tok)


def test_the_cli_parses_with_an_alias(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, shared: Path
) -> None:
    text = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert (
        main(["parse", "--format", "qwen25", "--tokenizer", str(shared / "tokenizers/qwen3")]) == 0
    )
    assert json.loads(capsys.readouterr().out)["tool_calls"][0]["function"]["name"] == "get_time"


# Runs in a fresh interpreter: what it registers must not leak into other tests.
_COLLISIONS = textwrap.dedent(
    """
    import dataclasses
    from toolwire import UsageError, formats

    hermes = formats.get("hermes")

    def refused(name, aliases=(), match=""):
        try:
            formats.register(dataclasses.replace(hermes, name=name), aliases=aliases)
        except UsageError as exc:
            assert match in str(exc), str(exc)
            assert name not in formats.names()
            return
        raise AssertionError(f"{name!r} with {aliases!r} was registered")

    refused("glm5", match="'glm47'")  # a built-in alias
    refused("GLM_5", match="'glm47'")  # the same spelling
    refused("Hermes", match="'hermes'")  # a built-in name, spelled otherwise
    refused("mine", aliases=("qwen25",), match="'hermes'")  # an alias that is taken
    refused("mine", aliases=("my-x", "my_x"), match="this format")  # twice in one call
    refused("mine", aliases="mine2", match="sequence of names")
    assert "mine" not in formats.aliases().values()

    formats.register(dataclasses.replace(hermes, name="mine"), aliases=("my_alias",))
    assert formats.get("My-Alias").name == "mine"
    assert formats.aliases()["my_alias"] == "mine"
    assert "mine" in formats.names() and "my_alias" not in formats.names()
    refused("my.alias", match="'mine'")
    print("ok")
    """
)


def test_a_name_or_alias_is_taken_once() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _COLLISIONS], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


_BUILTIN_FIRST = textwrap.dedent(
    """
    import toolwire.formats.hermes  # a format module imported before any lookup
    from toolwire import formats

    assert "hermes" in formats.names() and "qwen3" in formats.names()
    print(len(formats.names()))
    """
)


def test_a_builtin_format_module_imported_first_loads_the_rest() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BUILTIN_FIRST], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(formats.names())


def test_threads_looking_up_first_all_see_every_builtin() -> None:
    """The first lookups may come from several threads at once (`toolwire check
    --jobs`, a server's workers): none may see a half-loaded registry."""
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_LOOKUPS_IN_THREADS],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok"] * 8


_FIRST_LOOKUPS_IN_THREADS = textwrap.dedent(
    """
    import threading
    from toolwire import formats

    start = threading.Barrier(8)
    wanted = ["glm47", "qwen3_coder", "gpt_oss", "mistral", "pythonic", "deepseek_v4",
              "kimi_k2", "gemma4"]
    results = []

    def look(name):
        start.wait()
        try:
            results.append(formats.get(name).name == name and len(formats.names()) >= 16)
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=look, args=(name,)) for name in wanted]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        print("ok" if result is True else repr(result))
    """
)
