"""`vllm+toolwire`: toolwire's vLLM parser plugin, driven through vLLM's own serving path.

The plugin (`toolwire.integrations.vllm`) runs inside vLLM; this implementation checks
it exactly as the `vllm` implementation checks vLLM's own parsers: `worker.py` in the
peers' venv (vLLM 0.33), the same job (each case's tools, `tool_choice`,
`chat_template_kwargs`, prompt ids, ids, stop token) and the same per-request driving
(`adjust_request`, `skip_special_tokens` from the request it leaves, incremental
detokenization, `ChatStreamProcessor.step` per delta, `parser.parse(...,
model_output_token_ids=ids)` for the whole output). The only difference: the worker
registers the plugin first and asks `ParserManager` for `toolwire_<format>` with no
reasoning parser (the plugin owns reasoning). Every format toolwire ships has a plugin
parser, so this row covers every format whose tokenizer the worker loads (not mistral's
mistral-common one); it should equal the `toolwire` row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from peers.impls import PeerImpl
from peers.profiles import PeerSpec
from toolwire.check.cases import Case
from toolwire.check.impls import Target

__all__ = ["IMPL", "PLUGIN", "PluginImpl", "parser_spec"]

IMPL = "vllm+toolwire"


def parser_spec(format_name: str) -> PeerSpec:
    """The parser vLLM is started with for this format (`--tool-call-parser`)."""
    return PeerSpec(tool=f"toolwire_{format_name}")


@dataclass(frozen=True)
class PluginImpl(PeerImpl):
    """The plugin's parsers in the peers' venv, driven as vLLM's server drives any parser."""

    def spec(self, target: Target) -> PeerSpec | None:
        return parser_spec(target.fmt.name)

    def settings(self, spec: PeerSpec, cases: Sequence[Case], answer: dict[str, Any]) -> list[str]:
        loaded = "plugin: `toolwire.integrations.vllm.plugin.register()` before `get_parser`"
        return [loaded, *super().settings(spec, cases, answer)]


PLUGIN = PluginImpl(IMPL, "toolwire's vLLM plugin through vLLM's streaming/non-streaming path")
