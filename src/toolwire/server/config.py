"""Server configuration: command-line flags, each with a `TOOLWIRE_*` environment variable.

A flag given on the command line wins over its environment variable, which wins over
the default. `OPTIONS` is the one table: the CLI and `ServerConfig` read it, and the table of
docs/configuration.md is generated from it (`python -m scripts.doctables`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["OPTIONS", "Option", "ServerConfig", "add_arguments", "config_from"]


@dataclass(frozen=True)
class Option:
    flag: str
    kind: type
    default: Any
    help: str

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def env(self) -> str:
        return "TOOLWIRE_" + self.dest.upper()


OPTIONS: tuple[Option, ...] = (
    Option("--host", str, "127.0.0.1", "address to listen on"),
    Option("--port", int, 8000, "port to listen on"),
    Option("--engine", str, "llama", "llama (embedded), vllm or sglang"),
    Option(
        "--model",
        str,
        None,
        "GGUF path (llama; default: bundled SmolLM2-135M-Instruct) "
        "or the upstream's model name (vllm)",
    ),
    Option("--served-model-name", str, None, "the model name clients send (default: --model)"),
    Option("--upstream", str, None, "base URL of the vLLM or SGLang server"),
    Option(
        "--tokenizer",
        str,
        None,
        "tokenizer folder or file (default: from the GGUF; "
        "required for vllm/sglang unless --model is a local folder)",
    ),
    Option(
        "--format",
        str,
        None,
        "output format, a name or an alias (default, or 'auto': detected from the chat "
        "template and the vocabulary)",
    ),
    Option("--chat-template", str, None, "a .jinja chat template file (default: the model's)"),
    Option("--context", int, 4096, "context length of the embedded engine"),
    Option("--threads", int, None, "CPU threads of the embedded engine (default: all)"),
    Option("--max-tokens", int, 512, "max_tokens when a request gives none"),
    Option("--max-prompt-tokens", int, None, "longest prompt accepted for remote engines"),
    Option("--timeout", float, 600.0, "seconds one request may take (0: no limit)"),
    Option(
        "--upstream-timeout",
        float,
        60.0,
        "seconds to wait for an upstream connection or its next event",
    ),
    Option(
        "--stream-tool-arguments",
        bool,
        False,
        "stream tool call arguments as they come instead of holding each call until complete",
    ),
    Option(
        "--max-body-bytes",
        int,
        8 * 1024 * 1024,
        "largest request body accepted, in bytes (larger: 413)",
    ),
    Option("--max-tools", int, 128, "most tools one request may declare"),
    Option("--max-nesting", int, 64, "deepest JSON nesting accepted in a request body"),
    Option(
        "--grammar-timeout",
        float,
        10.0,
        "seconds a request waits for its structural tag to compile on the embedded engine; "
        "past it the request runs unconstrained and the compile goes on for the next one "
        "(0: no limit)",
    ),
    Option("--grammar-workers", int, 1, "structural tag compiles running at once"),
    Option("--grammar-cache", int, 64, "compiled structural tags kept (entries)"),
    Option("--grammar-cache-mb", int, 512, "compiled structural tags kept (megabytes)"),
    Option("--log-level", str, "info", "debug, info, warning or error"),
)


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    engine: str = "llama"
    model: str | None = None
    served_model_name: str | None = None
    upstream: str | None = None
    tokenizer: str | None = None
    format: str | None = None
    chat_template: str | None = None
    context: int = 4096
    threads: int | None = None
    max_tokens: int = 512
    max_prompt_tokens: int | None = None
    timeout: float = 600.0
    upstream_timeout: float = 60.0
    stream_tool_arguments: bool = False
    max_body_bytes: int = 8 * 1024 * 1024
    max_tools: int = 128
    max_nesting: int = 64
    grammar_timeout: float = 10.0
    grammar_workers: int = 1
    grammar_cache: int = 64
    grammar_cache_mb: int = 512
    log_level: str = "info"


def _from_env(option: Option, environ: Mapping[str, str]) -> Any:
    raw = environ.get(option.env)
    if raw is None or raw == "":
        return option.default
    if option.kind is bool:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    try:
        return option.kind(raw)
    except ValueError as exc:
        raise ValueError(f"{option.env}={raw!r}: expected {option.kind.__name__}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every option as a flag (defaults are resolved later, with the environment)."""
    for option in OPTIONS:
        help_text = f"{option.help} [{option.env}]"
        if option.kind is bool:
            parser.add_argument(option.flag, action="store_true", default=None, help=help_text)
        else:
            parser.add_argument(option.flag, type=option.kind, default=None, help=help_text)


def config_from(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ServerConfig:
    """Flags over environment over defaults."""
    environ = os.environ if environ is None else environ
    values = {}
    for option in OPTIONS:
        given = getattr(args, option.dest, None)
        values[option.dest] = given if given is not None else _from_env(option, environ)
    if values["engine"] not in ("llama", "vllm", "sglang"):
        raise ValueError(f"--engine must be llama, vllm or sglang, not {values['engine']!r}")
    if values["engine"] != "llama" and not values["upstream"]:
        raise ValueError(f"--engine {values['engine']} needs --upstream URL")
    for bound in ("max_body_bytes", "max_tools", "max_nesting"):
        if values[bound] < 1:
            raise ValueError(f"--{bound.replace('_', '-')} must be at least 1")
    return ServerConfig(**values)
