"""toolwire as a vLLM parser plugin: `toolwire_<format>` for every toolwire format.

Load it with vLLM's own flags::

    vllm serve MODEL --enable-auto-tool-choice \\
        --tool-parser-plugin "$(python -m toolwire.integrations.vllm --path)" \\
        --tool-call-parser toolwire_qwen3

(`--tool-parser-plugin toolwire.integrations.vllm.plugin`, a module name, works too.)

This package stays importable without vLLM: `plugin` is what imports vLLM and
registers the parsers; `request` holds the vLLM-free part (one request's parse, the
structural tag, the tokenizer bridge), so it is tested without an engine.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["plugin_path"]


def plugin_path() -> Path:
    """The file to pass to vLLM's `--tool-parser-plugin`."""
    return Path(__file__).resolve().parent / "toolwire_vllm_plugin.py"
