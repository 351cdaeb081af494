"""Per-format facts the conformance run needs: which tokenizer, which peer parsers.

A format registered in `toolwire.formats` but missing here is still checked for
toolwire when its tokenizer can be guessed (a folder of the same name); peers only
run formats listed with their parser names. Keep this table in step with the
registry: `profile(name)` says plainly when a format has no entry.

Tokenizer sources: a folder (or file) under `<data>/tokenizers/` holding a real
vocabulary, or
`derived:<family>` for families whose vocabulary is not available offline (Qwen3's
real byte-level BPE vocabulary with the family's own special tokens; see `vocab.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PROFILES", "PeerSpec", "Profile", "profile"]


@dataclass(frozen=True)
class PeerSpec:
    """How a peer implementation parses this format (its parser names and options)."""

    #: Tool parser (vLLM `tool_parser_name`, SGLang `tool_call_parser`).
    tool: str
    #: Reasoning parser name, or None when the format has no reasoning block.
    reasoning: str | None = None
    #: vLLM only: the harmony path (gpt-oss).
    harmony: bool = False
    #: `chat_template_kwargs` the request carries (DeepSeek's thinking switch).
    template_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    """A format's tokenizer and its peers' parsers."""

    #: A folder or file under `<data>/tokenizers/`, or `derived:<family>`.
    tokenizer: str
    vllm: PeerSpec | None = None
    sglang: PeerSpec | None = None


_THINK = {"thinking": True}

PROFILES: dict[str, Profile] = {
    "hermes": Profile("qwen3", PeerSpec("hermes"), PeerSpec("qwen25")),
    "qwen3": Profile("qwen3", PeerSpec("hermes", "qwen3"), PeerSpec("qwen25", "qwen3")),
    "qwen3_coder": Profile(
        "qwen3", PeerSpec("qwen3_coder", "qwen3"), PeerSpec("qwen3_coder", "qwen3")
    ),
    "deepseek_v3": Profile("deepseek_v3", PeerSpec("deepseek_v3"), PeerSpec("deepseekv3")),
    # vLLM's deepseek_v3 reasoning parser needs <think> ids, which the offline DeepSeek
    # V3 vocabulary lacks (V3.1's has them): vLLM runs without a reasoning parser here.
    "deepseek_v31": Profile(
        "deepseek_v3",
        PeerSpec("deepseek_v31"),
        PeerSpec("deepseekv31", "deepseek-v3", template_kwargs=_THINK),
    ),
    "deepseek_v32": Profile(
        "deepseek_v4",
        PeerSpec("deepseek_v32", "deepseek_v3", template_kwargs=_THINK),
        PeerSpec("deepseekv32", "deepseek-v3", template_kwargs=_THINK),
    ),
    "deepseek_v4": Profile(
        "deepseek_v4",
        PeerSpec("deepseek_v4", "deepseek_v4", template_kwargs=_THINK),
        PeerSpec("deepseekv4", "deepseek-v4", template_kwargs=_THINK),
    ),
    "kimi_k2": Profile(
        "derived:kimi_k2", PeerSpec("kimi_k2", "kimi_k2"), PeerSpec("kimi_k2", "kimi_k2")
    ),
    "glm45": Profile("derived:glm", PeerSpec("glm45", "glm45"), PeerSpec("glm45", "glm45")),
    "glm47": Profile("derived:glm", PeerSpec("glm47", "glm45"), PeerSpec("glm47", "glm45")),
    "minimax_m2": Profile(
        "derived:minimax_m2",
        PeerSpec("minimax_m2", "minimax_m2"),
        PeerSpec("minimax-m2", "minimax-append-think"),
    ),
    "gemma4": Profile("derived:gemma4", PeerSpec("gemma4", "gemma4"), PeerSpec("gemma4", "gemma4")),
    "gpt_oss": Profile(
        "gpt_oss",
        PeerSpec("openai", "openai_gptoss", harmony=True),
        PeerSpec("gpt-oss", "gpt-oss"),
    ),
    "llama3_json": Profile("llama3", PeerSpec("llama3_json"), PeerSpec("llama3")),
    "pythonic": Profile("llama3", PeerSpec("pythonic"), PeerSpec("pythonic")),
    "mistral": Profile("mistral/tekken_240718.json.gz", PeerSpec("mistral"), PeerSpec("mistral")),
}


def profile(fmt: str) -> Profile:
    """The profile of `fmt`; a format without one is tested with a same-named folder."""
    return PROFILES.get(fmt) or Profile(fmt)
