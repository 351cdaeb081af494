"""toolwire inside vLLM, on both sides: a tool-parser plugin and a renderer.

One install (`pip install 'toolwire[vllm]'` in vLLM's environment) registers the
`vllm.general_plugins` entry point `toolwire`, which vLLM runs in every process; it
registers

* the output side: `toolwire_<format>` tool parsers (`plugin`), read by token id;
* the input side: `--tokenizer-mode toolwire` (`renderer`): vLLM's Hugging Face
  tokenizer, with chat requests rendered by `toolwire.render_prompt`, isolation on.

`python -m toolwire.integrations.vllm --serve-args qwen3` prints the flags for both::

    vllm serve MODEL $(python -m toolwire.integrations.vllm --serve-args qwen3)

(`--tokenizer-mode toolwire --enable-auto-tool-choice --tool-call-parser
toolwire_qwen3`.) Without the entry point (toolwire on `PYTHONPATH` only), the output
side alone still loads from a file: `--tool-parser-plugin "$(python -m
toolwire.integrations.vllm --path)"`.

This package stays importable without vLLM: `plugin` and `renderer` import vLLM;
`request` (one request's parse, the structural tag, the tokenizer bridge) and `chat`
(one request's prompt) are vLLM-free and tested without an engine.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

from toolwire import formats
from toolwire.integrations.vllm.chat import MODE

__all__ = ["ENTRY_POINT", "MODE", "entry_point_installed", "plugin_path", "serve_args"]

#: The `vllm.general_plugins` entry point this package installs.
ENTRY_POINT = "toolwire.integrations.vllm.plugin:register_all"


def plugin_path() -> Path:
    """The file to pass to vLLM's `--tool-parser-plugin` (output side only)."""
    return Path(__file__).resolve().parent / "toolwire_vllm_plugin.py"


def entry_point_installed() -> bool:
    """Whether vLLM will find toolwire's general plugin in this environment."""
    return any(ep.value == ENTRY_POINT for ep in entry_points(group="vllm.general_plugins"))


def serve_args(format: str) -> list[str]:
    """The `vllm serve` flags for toolwire on both sides, one flag (and its value) per
    item. `format`: a toolwire format or alias (`UsageError` names the known ones).

    No `--tool-parser-plugin`: the entry point registers the parsers in every vLLM
    process, the renderer's tokenizer mode with them (the renderer cannot come from a
    parser plugin file, which vLLM imports in its API server process only).
    """
    canonical = formats.get(format).name
    name = format if format in formats.names() or format in formats.aliases() else canonical
    return [
        f"--tokenizer-mode {MODE}",
        "--enable-auto-tool-choice",
        f"--tool-call-parser toolwire_{name}",
    ]
