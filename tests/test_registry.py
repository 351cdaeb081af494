"""The format registry: custom formats beside the built-ins, and `is_gated`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest

from toolwire import Parser, formats
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
