"""Engines: token ids in, token ids out.

`llama` runs a GGUF model in-process (the default, with the bundled SmolLM2); `vllm`
and `sglang` speak those servers' token-id endpoints over HTTP. See `base` for the
contract every engine keeps.
"""

from toolwire.backends.base import Delta, Engine, EngineError, Generation

__all__ = ["Delta", "Engine", "EngineError", "Generation"]
