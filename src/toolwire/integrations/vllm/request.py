"""One request's parse inside vLLM, without vLLM: the part of the plugin that is plain toolwire.

Data flow (one chat request in a vLLM server started with the plugin)::

    vLLM's tokenizer --bridge_tokenizer()--> toolwire Tokenizer over a copy of vLLM's
                                             own backend (once per tokenizer object)
    request.tools / tool_choice (vLLM's pydantic objects)
        --openai_tools(), openai_tool_choice()--> OpenAI dicts
        --constraint_for()--> the constraint `toolwire serve` would send, in the form
                              of this vLLM's structured-output backend (`BACKEND`:
                              XGrammar's structural tag, or llguidance's Lark
                              grammar under `--structured-outputs-config.backend
                              guidance`); the operator's policy from the
                              TOOLWIRE_GUIDANCE* variables, as `toolwire serve`
                              reads them: `toolwire.server.guidance`
    prompt ids --prompt_in_reasoning()--> does the output start inside reasoning?
    output ids --RequestParse.feed()/finish()--> toolwire events (one Parser per
                                                 request, ids exactly as they come)

Nothing here imports vLLM; `plugin` turns events into vLLM's objects.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as _Backend

from toolwire import formats
from toolwire.backends.grammar_backend import (
    BACKENDS,
    GUIDANCE,
    XGRAMMAR,
    request_grammar,
    warm_upstream_specials,
)
from toolwire.errors import UsageError
from toolwire.events import Event
from toolwire.grammar import GrammarPolicy, TagResult
from toolwire.grammar.policy import loosen
from toolwire.parser import Parser
from toolwire.server.guidance import policy_from_env
from toolwire.tokenizer import HuggingFaceTokenizer, Tokenizer

__all__ = [
    "BACKEND",
    "RequestParse",
    "bridge_tokenizer",
    "configured_backend",
    "constraint_for",
    "openai_tool_choice",
    "openai_tools",
    "prompt_in_reasoning",
    "relaxed_tag_for",
    "structural_tag_for",
]

#: The operator's guidance policy, from the same `TOOLWIRE_GUIDANCE*` variables
#: `toolwire serve` reads (read once, in each vLLM process, when the plugin loads).
POLICY: GrammarPolicy = policy_from_env(os.environ)


def _flag(argv: Sequence[str], name: str) -> str | None:
    """The value of `--name value` or `--name=value` in `argv` (the last one given;
    underscores read as dashes, as vLLM's argument parser reads them)."""
    found = None
    for n, arg in enumerate(argv):
        key, equals, value = arg.partition("=")
        if key.replace("_", "-") != name:
            continue
        if equals:
            found = value
        elif n + 1 < len(argv):
            found = argv[n + 1]
    return found


def configured_backend(argv: Sequence[str], environ: Mapping[str, str]) -> str:
    """The structured-output backend of the vLLM the plugin runs in, which decides the
    form of the constraint: `TOOLWIRE_GRAMMAR_BACKEND` (xgrammar or llguidance, as
    `toolwire serve --grammar-backend`) when set, else what vLLM was started with
    (`--structured-outputs-config.backend guidance`, or the JSON form of the same
    flag, is llguidance; every other backend, and vLLM's `auto`, which takes a
    structural tag to XGrammar, is xgrammar)."""
    named = environ.get("TOOLWIRE_GRAMMAR_BACKEND", "auto").strip().lower()
    if named in BACKENDS:
        return named
    if named != "auto":
        raise UsageError(f"TOOLWIRE_GRAMMAR_BACKEND={named!r}: use auto, xgrammar or llguidance")
    backend = _flag(argv, "--structured-outputs-config.backend")
    whole = _flag(argv, "--structured-outputs-config")
    if backend is None and whole is not None:
        try:
            config = json.loads(whole)
        except ValueError:
            config = None
        if isinstance(config, dict) and isinstance(config.get("backend"), str):
            backend = config["backend"]
    return GUIDANCE if backend is not None and backend.strip() == "guidance" else XGRAMMAR


#: The form the plugin's constraints take in this vLLM process (read once, when the
#: plugin loads, from the operator's variable or vLLM's own command line).
BACKEND: str = configured_backend(sys.argv, os.environ)

_LOCK = threading.Lock()
#: vLLM tokenizer object -> toolwire Tokenizer; the object is kept so its id stays unique.
_BRIDGED: dict[int, tuple[Any, Tokenizer]] = {}


def bridge_tokenizer(vllm_tokenizer: Any) -> Tokenizer:
    """toolwire's view of the vocabulary vLLM serves (built once per tokenizer object).

    The tokenizer is a copy of vLLM's own fast tokenizer's `tokenizers` backend, as
    transformers built it (transformers may rebuild a checkpoint's pre-tokenizer and
    decoder from its tokenizer class), so toolwire encodes and decodes exactly as vLLM
    does; toolwire never changes vLLM's object. The named tokens and added-token flags
    come from the model folder's tokenizer_config.json when the model is local, else
    from vLLM's tokenizer.
    """
    key = id(vllm_tokenizer)
    with _LOCK:
        hit = _BRIDGED.get(key)
        if hit is not None and hit[0] is vllm_tokenizer:
            return hit[1]
    backend = getattr(vllm_tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise UsageError(
            f"toolwire needs a Hugging Face fast tokenizer (tokenizer.json); vLLM "
            f"serves {type(vllm_tokenizer).__name__}"
        )
    name = str(getattr(vllm_tokenizer, "name_or_path", "") or "")
    config = _folder_config(Path(name)) if name else None
    if config is None:
        config = {
            key: value
            for key in ("bos_token", "eos_token", "pad_token", "unk_token")
            if isinstance(value := getattr(vllm_tokenizer, key, None), str)
        }
    template = getattr(vllm_tokenizer, "chat_template", None)
    tok = HuggingFaceTokenizer(
        _Backend.from_str(backend.to_str()),
        config,
        chat_template=template if isinstance(template, str) else None,
        name=name,
    )
    with _LOCK:
        _BRIDGED[key] = (vllm_tokenizer, tok)
    if BACKEND == GUIDANCE:  # which ids vLLM's llguidance takes as special: seconds, once
        warm_upstream_specials(tok)
    return tok


def _folder_config(folder: Path) -> dict[str, Any] | None:
    """A local model folder's tokenizer_config.json (None: not a local folder, or none)."""
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the tokenizer config ({exc})") from exc
    if not isinstance(config, dict):
        raise UsageError(f"{path}: the tokenizer config is not a JSON object")
    return config


def _plain(value: Any) -> Any:
    """A pydantic object (vLLM's request types) as plain data."""
    dump = getattr(value, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else value


def openai_tools(tools: Sequence[Any] | None) -> list[dict[str, Any]] | None:
    """The request's tools as Chat Completions dicts (Responses' flat function tools too)."""
    if not tools:
        return None
    out: list[dict[str, Any]] = []
    for tool in tools:
        data = _plain(tool)
        if not isinstance(data, Mapping):
            continue
        if "function" in data:
            out.append(dict(data))
        elif data.get("type", "function") == "function" and "name" in data:
            function = {
                k: data[k] for k in ("name", "description", "parameters", "strict") if k in data
            }
            out.append({"type": "function", "function": function})
    return out or None


def openai_tool_choice(choice: Any) -> str | dict[str, Any]:
    """`auto`, `none`, `required` or `{"type": "function", "function": {"name": ...}}`."""
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        return choice
    data = _plain(choice)
    if isinstance(data, Mapping):
        function = data.get("function")
        name = function.get("name") if isinstance(function, Mapping) else data.get("name")
        if isinstance(name, str):
            return {"type": "function", "function": {"name": name}}
    raise UsageError(f"unsupported tool_choice {choice!r}")


def prompt_in_reasoning(fmt: str, tok: Tokenizer, prompt_ids: Sequence[int] | None) -> bool | None:
    """True when the prompt ends inside a reasoning block it opened (None: not known).

    Read from ids where the reasoning delimiters are single tokens (the last opening id
    after the last closing one), else from the decoded text.
    """
    spec = formats.get(fmt)
    if not prompt_ids or spec.reasoning is None:
        return None
    opener, closer = spec.reasoning
    open_id, close_id = tok.token_id(opener), tok.token_id(closer)
    ids = list(prompt_ids)
    if open_id is not None and close_id is not None:
        last_open = max((i for i, t in enumerate(ids) if t == open_id), default=-1)
        last_close = max((i for i, t in enumerate(ids) if t == close_id), default=-1)
        return last_open > last_close
    text = tok.decode(ids)
    return text.rfind(opener) > text.rfind(closer)


def structural_tag_for(
    fmt: str,
    tok: Tokenizer,
    tools: list[dict[str, Any]] | None,
    tool_choice: str | dict[str, Any],
    parallel_tool_calls: bool,
    policy: GrammarPolicy | None = None,
) -> TagResult:
    """The XGrammar tag `toolwire serve` attaches to the same request under the same
    policy (`POLICY` unless given; no tag for `none`): `constraint_for` on XGrammar."""
    return constraint_for(fmt, tok, tools, tool_choice, parallel_tool_calls, XGRAMMAR, policy)


class _Upstream:
    """What `request_grammar` asks of an engine: the backends it applies."""

    def __init__(self, backend: str) -> None:
        self.grammar_backends = (backend,)


def constraint_for(
    fmt: str,
    tok: Tokenizer,
    tools: list[dict[str, Any]] | None,
    tool_choice: str | dict[str, Any],
    parallel_tool_calls: bool,
    backend: str | None = None,
    policy: GrammarPolicy | None = None,
) -> TagResult:
    """The constraint `toolwire serve` sends a vLLM running `backend` (`BACKEND` unless
    given) for the same request under the same policy: XGrammar's structural tag, or
    llguidance's form (`{"grammars": [{"lark_grammar": ...}]}`, its tokens read as
    vLLM's llguidance reads the vocabulary). No constraint for `none`, or where the
    backend cannot express the tag (the reason says so)."""
    if not tools or tool_choice == "none":
        return TagResult(None, ("no tools, or tool_choice 'none'",), "no_tools")
    return request_grammar(
        _Upstream(BACKEND if backend is None else backend),
        fmt,
        tools,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
        tokenizer=tok,
        policy=POLICY if policy is None else policy,
    )


def relaxed_tag_for(
    fmt: str,
    tok: Tokenizer,
    tools: list[dict[str, Any]] | None,
    tool_choice: str | dict[str, Any],
    parallel_tool_calls: bool,
    backend: str | None = None,
    policy: GrammarPolicy | None = None,
) -> dict[str, Any] | None:
    """What replaces a constraint the engine refuses, as `toolwire serve` does it: for
    forced calls the native envelope with any JSON object as arguments; for `auto`,
    nothing."""
    if not tools or tool_choice in ("auto", "none"):
        return None
    return constraint_for(
        fmt, tok, loosen(tools), tool_choice, parallel_tool_calls, backend, policy
    ).tag


class RequestParse:
    """toolwire's `Parser` for one request's output, fed its ids as vLLM produces them."""

    def __init__(
        self,
        fmt: str,
        tok: Tokenizer,
        *,
        tools: list[dict[str, Any]] | None,
        tool_choice: str | dict[str, Any],
        parallel_tool_calls: bool,
        in_reasoning: bool | None,
        call_id: Callable[[int], str],
    ) -> None:
        minted: dict[int, str] = {}

        def stable_id(index: int) -> str:
            if index not in minted:
                minted[index] = call_id(index)
            return minted[index]

        self.parser = Parser(
            fmt,
            tok,
            tools=tools,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
            in_reasoning=in_reasoning,
            call_id=stable_id,
        )
        self.finished = False

    def feed(self, ids: Sequence[int]) -> list[Event]:
        return self.parser.feed(ids) if ids else []

    def finish(self) -> list[Event]:
        """End of output (once; later calls return nothing)."""
        if self.finished:
            return []
        self.finished = True
        return self.parser.finish()
