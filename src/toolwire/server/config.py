"""Server configuration: command-line flags, each with a `TOOLWIRE_*` environment variable.

A flag given on the command line wins over its environment variable, which wins over
the default. `OPTIONS` is the one table: the CLI and `ServerConfig` read it, and the
table of docs/configuration.md is generated from it (`python -m scripts.doctables`). A
repeatable flag (`--api-key`) collects every occurrence; its variable holds one value or
several separated by commas. The guidance switches come from `guidance.SWITCHES` (the
vLLM plugin reads the same variables).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolwire.server import guidance

__all__ = ["OPTIONS", "Option", "ServerConfig", "add_arguments", "config_from", "served_names"]


@dataclass(frozen=True)
class Option:
    flag: str
    kind: type
    default: Any
    help: str
    #: The flag may be given several times (a tuple of values).
    repeat: bool = False

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
    Option(
        "--served-model-name",
        str,
        None,
        "the model names clients send, comma-separated: the first is the model's name "
        "(default: --model's), the others more names or fnmatch patterns "
        "('qwen3,claude-*', or '*' for any name)",
    ),
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
    Option(
        "--context",
        int,
        None,
        "context length of the embedded engine (default: the GGUF's training context)",
    ),
    Option(
        "--threads",
        int,
        None,
        "CPU threads of the embedded engine, for generation and prompts alike "
        "(default: llama.cpp's, half the cores to generate and all for prompts)",
    ),
    Option("--max-tokens", int, 512, "max_tokens when a request gives none"),
    Option(
        "--max-prompt-tokens",
        int,
        None,
        "longest prompt accepted (default: the model's context less one; for vllm/sglang "
        "the context is the upstream's max_model_len from its /v1/models)",
    ),
    Option(
        "--hosted-tools",
        str,
        "drop",
        "hosted tools a request declares (web_search, file_search, mcp...): drop (not "
        "offered; named in a response header, counted) or refuse (a 400)",
    ),
    Option("--timeout", float, 600.0, "seconds one request may take (0: no limit)"),
    Option(
        "--upstream-timeout",
        float,
        60.0,
        "seconds to wait for an upstream connection or its next token (SSE comments and "
        "events without a token are not progress)",
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
    Option(
        "--grammar-backend",
        str,
        "auto",
        "the constraint backend the vLLM/SGLang upstream runs: xgrammar or llguidance "
        "(auto: SGLang's own says, else xgrammar; the embedded engine picks its own)",
    ),
    Option("--grammar-workers", int, 1, "structural tag compiles running at once"),
    Option("--grammar-cache", int, 64, "compiled structural tags kept (entries)"),
    Option("--grammar-cache-mb", int, 512, "compiled structural tags kept (megabytes)"),
    Option("--log-level", str, "info", "debug, info, warning or error"),
    Option(
        "--workers",
        int,
        1,
        "server processes sharing the port, each with its own engine (metrics are summed "
        "over them; the store is shared)",
    ),
    Option(
        "--api-key",
        str,
        (),
        "a key clients must send (Authorization: Bearer KEY, or x-api-key: KEY); repeat "
        "for several; none given: no authentication",
        repeat=True,
    ),
    Option("--api-key-file", str, None, "a file of keys, one per line ('#' starts a comment)"),
    Option("--protect-metrics", bool, False, "/metrics needs a key too (/health never does)"),
    Option(
        "--store",
        str,
        None,
        "where stored responses live: a SQLite file (default: "
        "$XDG_CACHE_HOME/toolwire/responses.sqlite3), redis://HOST:PORT/DB (shared by "
        "replicas), or memory (this process only)",
    ),
    Option(
        "--store-ttl",
        float,
        30 * 24 * 3600.0,
        "seconds a stored response is kept (0: until the byte bound evicts it)",
    ),
    Option(
        "--store-max-mb",
        int,
        256,
        "megabytes of stored responses kept per key (per tenant), oldest evicted first",
    ),
    Option(
        "--max-echo-bytes",
        int,
        512 * 1024,
        "largest client-supplied field a response echoes (instructions, tools, text, "
        "tool_choice), as JSON bytes (larger: 400)",
    ),
    Option(
        "--ready-timeout",
        float,
        5.0,
        "seconds /health/ready gives the engine to answer a one-token request",
    ),
    Option(
        "--otlp-endpoint",
        str,
        None,
        "export OpenTelemetry traces to this OTLP collector (http://HOST:4318; needs "
        "the otel extra)",
    ),
    Option("--otlp-protocol", str, "http/protobuf", "OTLP transport: http/protobuf or grpc"),
    *(Option(switch.flag, str, switch.default, switch.help) for switch in guidance.SWITCHES),
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
    context: int | None = None
    threads: int | None = None
    max_tokens: int = 512
    max_prompt_tokens: int | None = None
    hosted_tools: str = "drop"
    timeout: float = 600.0
    upstream_timeout: float = 60.0
    stream_tool_arguments: bool = False
    max_body_bytes: int = 8 * 1024 * 1024
    max_tools: int = 128
    max_nesting: int = 64
    grammar_timeout: float = 10.0
    grammar_backend: str = "auto"
    grammar_workers: int = 1
    grammar_cache: int = 64
    grammar_cache_mb: int = 512
    log_level: str = "info"
    workers: int = 1
    api_key: tuple[str, ...] = ()
    api_key_file: str | None = None
    protect_metrics: bool = False
    store: str | None = None
    store_ttl: float = 30 * 24 * 3600.0
    store_max_mb: int = 256
    max_echo_bytes: int = 512 * 1024
    ready_timeout: float = 5.0
    otlp_endpoint: str | None = None
    otlp_protocol: str = "http/protobuf"
    guidance: str = "on"
    guidance_scope: str = "always"
    guidance_schema: str = "auto"
    guidance_max_whitespace: str = "16"
    guidance_exclude_delimiters: str = "on"
    guidance_shared_rules: str = "on"


def served_names(config: ServerConfig) -> tuple[str | None, tuple[str, ...]]:
    """`--served-model-name` split: the model's own name (None: the default), and the
    further names or patterns requests may send for it."""
    names = [n.strip() for n in (config.served_model_name or "").split(",") if n.strip()]
    if not names:
        return None, ()
    first, *more = names
    if any(c in first for c in "*?["):  # a pattern only: the model keeps its own name
        return None, tuple(names)
    return first, tuple(more)


def _from_env(option: Option, environ: Mapping[str, str]) -> Any:
    raw = environ.get(option.env)
    if raw is None or raw == "":
        return option.default
    if option.kind is bool:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if option.repeat:
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    try:
        return option.kind(raw)
    except ValueError as exc:
        raise ValueError(f"{option.env}={raw!r}: expected {option.kind.__name__}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every option as a flag (defaults are resolved later, with the environment)."""
    for option in OPTIONS:
        help_text = f"{option.help} [{option.env}]"
        if option.repeat:
            parser.add_argument(option.flag, action="append", default=None, help=help_text)
        elif option.kind is bool:
            parser.add_argument(option.flag, action="store_true", default=None, help=help_text)
        else:
            parser.add_argument(option.flag, type=option.kind, default=None, help=help_text)


def config_from(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ServerConfig:
    """Flags over environment over defaults."""
    environ = os.environ if environ is None else environ
    values = {}
    for option in OPTIONS:
        given = getattr(args, option.dest, None)
        if given is not None and option.repeat:
            given = tuple(given)
        values[option.dest] = given if given is not None else _from_env(option, environ)
    if values["engine"] not in ("llama", "vllm", "sglang"):
        raise ValueError(f"--engine must be llama, vllm or sglang, not {values['engine']!r}")
    if values["grammar_backend"] not in ("auto", "xgrammar", "llguidance"):
        raise ValueError("--grammar-backend must be auto, xgrammar or llguidance")
    if values["engine"] != "llama" and not values["upstream"]:
        raise ValueError(f"--engine {values['engine']} needs --upstream URL")
    if values["hosted_tools"] not in ("drop", "refuse"):
        raise ValueError(f"--hosted-tools must be drop or refuse, not {values['hosted_tools']!r}")
    for bound in ("max_body_bytes", "max_tools", "max_nesting", "workers", "max_echo_bytes"):
        if values[bound] < 1:
            raise ValueError(f"--{bound.replace('_', '-')} must be at least 1")
    if values["store_max_mb"] < 1:
        raise ValueError("--store-max-mb must be at least 1")
    if values["store_ttl"] < 0:  # a negative age would expire every entry as it is stored
        raise ValueError("--store-ttl must be 0 (no expiry) or more seconds")
    if values["workers"] > 1 and values["store"] == "memory":
        raise ValueError(
            "--store memory keeps responses in one process: with --workers use the "
            "default SQLite file or redis://"
        )
    if values["otlp_protocol"] not in ("http/protobuf", "grpc"):
        raise ValueError("--otlp-protocol must be http/protobuf or grpc")
    guidance.policy_from(values)  # a bad switch is named now, not on the first request
    return ServerConfig(**values)
