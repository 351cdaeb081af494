"""Runs a peer's parsers (vLLM or SGLang) the way its server runs them, per request.

Runs in the peers' virtual environment (`.venv-bench`, see the Makefile), started by
`toolwire check` / the benchmark as `python -m peers.worker`: one JSON job on
file in, one JSON answer file out. Every request setting is decided by the peer's own
code, not by the caller (the file:line of each step is in `peers/profiles.py`):

* vLLM 0.33: the parser class from `ParserManager.get_parser`; per request a parser
  built with the request's `chat_template_kwargs`, given the prompt ids, and its
  `adjust_request` applied when the server applies it (which is what sets
  `skip_special_tokens`); then the streaming deltas through `ChatStreamProcessor.step`
  (with the prompt ids) or `parser.parse` + `assemble_chat_message_fields`.
* SGLang 0.5.23: the request's `skip_special_tokens` as `_process_messages` leaves it;
  then the server's own methods, on an `OpenAIServingChat` holding only the state they
  read: `_process_reasoning_stream` / `_process_tool_call_stream` /
  `_check_for_unstreamed_tool_args` per delta, `ReasoningParser` + `_process_tool_calls`
  for the non-streaming response; whether reasoning is forced comes from
  `_get_reasoning_from_request` with the template's reasoning switch as SGLang's
  template manager detects it.
* `vllm+toolwire`: the same vLLM path, after toolwire's vLLM plugin registered its
  `toolwire_<format>` parsers (as `--tool-parser-plugin` does).
* Detokenization: each delta's text is the incremental detokenization of its ids with
  the request's `skip_special_tokens`; a final stop token's text is trimmed as each
  server's detokenizer trims it (its id still reaches vLLM's parser).

Job: {"impl", "spec": {tool, reasoning, harmony}, "tokenizer": path to a
tokenizer.json, "template": chat template text or null, "env": {...}, "cases":
[{"tools", "tool_choice", "template_kwargs", "prompt_ids", "ids", "stop": bool (the
last id is a stop token), "runs": [null (non-streaming) | [delta sizes]]}]}.
Answer: {"outcomes": [[{content, reasoning, calls, error}]], "seconds": [[float]],
"settings": [{skip_special_tokens, force_reasoning, parsed_tools}], "versions": {}}.

`VllmRunner`/`SglangRunner` also serve the parser benchmark (`stream(tools, texts,
ids)`, texts already detokenized).
"""

from __future__ import annotations
import __future__

import ast
import asyncio
import json
import logging
import os
import sys
import time
from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

__all__ = ["main"]

Result = tuple[dict[str, Any], float]


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def _chunks(ids: list[int], sizes: list[int]) -> list[list[int]]:
    out, start = [], 0
    for size in sizes:
        out.append(ids[start : start + size])
        start += size
    return out


def delta_texts(
    tokenizer: Any, deltas: list[list[int]], skip: bool, trim_last: bool = False
) -> list[str]:
    """Each delta's text from an incremental detokenizer (`tokenizers`' DecodeStream).

    `trim_last`: the last id is a stop token whose text the server trims.
    """
    stream_cls = import_module("tokenizers.decoders").DecodeStream
    stream = stream_cls(skip_special_tokens=skip)
    backend = tokenizer.backend_tokenizer
    out = []
    last = len(deltas) - 1
    for k, delta in enumerate(deltas):
        ids = delta[:-1] if trim_last and k == last and delta else delta
        out.append("".join(stream.step(backend, i) or "" for i in ids))
    return out


def full_text(tokenizer: Any, ids: list[int], skip: bool, trim_last: bool = False) -> str:
    ids = ids[:-1] if trim_last and ids else ids
    return str(tokenizer.decode(ids, skip_special_tokens=skip))


class VllmRunner:
    """vLLM 0.33: ParserManager's parser class, driven as `OpenAIServingChat` drives it."""

    name = "vllm"

    def __init__(self, spec: dict[str, Any], tokenizer: Any, in_reasoning: bool = False) -> None:
        manager = import_module("vllm.parser.parser_manager").ParserManager
        protocol = import_module("vllm.entrypoints.openai.chat_completion.protocol")
        stream = import_module("vllm.entrypoints.openai.chat_completion.stream_processor")
        assembly = import_module("vllm.entrypoints.openai.chat_completion.message_assembly")
        self._request_cls = protocol.ChatCompletionRequest
        self._processor_cls = stream.ChatStreamProcessor
        self._assemble = assembly.assemble_chat_message_fields
        self.cls = manager.get_parser(
            tool_parser_name=spec["tool"],
            enable_auto_tools=True,
            reasoning_parser_name=spec.get("reasoning"),
            is_harmony=bool(spec.get("harmony")),
        )
        self.tokenizer = tokenizer
        self.default_kwargs = spec.get("template_kwargs") or None

    def request(
        self,
        tools: list[dict[str, Any]],
        tool_choice: str = "auto",
        kwargs: dict[str, Any] | None = None,
        prompt_ids: list[int] | None = None,
    ) -> tuple[Any, bool]:
        """The request as the server leaves it before sampling, and its skip setting."""
        req = self._request_cls(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=tools or None,
            tool_choice=tool_choice,
            chat_template_kwargs=kwargs,
        )
        cls = self.cls
        # online_renderer.py: adjust_request runs unless tool_choice is "none" and the
        # parser has no reasoning parser and does not ask for it.
        adjust = (
            getattr(cls, "always_adjust_request", False)
            or getattr(cls, "reasoning_parser_cls", None) is not None
            or tool_choice != "none"
        )
        if adjust:
            probe = cls(self.tokenizer, req.tools, chat_template_kwargs=kwargs)
            if prompt_ids is not None:
                probe.set_prompt_token_ids(prompt_ids)
            req = probe.adjust_request(request=req)
        skip = req.skip_special_tokens
        return req, True if skip is None else bool(skip)  # protocol.py: default True

    def parser(self, req: Any, kwargs: dict[str, Any] | None) -> Any:
        return self.cls(self.tokenizer, req.tools, chat_template_kwargs=kwargs)

    def batch(
        self,
        tools: list[dict[str, Any]],
        text: str,
        ids: list[int],
        req: Any = None,
        kwargs: dict[str, Any] | None = None,
        prompt_ids: list[int] | None = None,
    ) -> Result:
        if req is None:
            kwargs = kwargs or self.default_kwargs
            req, _ = self.request(tools, kwargs=kwargs)
        parser = self.parser(req, kwargs)
        start = time.perf_counter()
        if prompt_ids is not None:
            parser.set_prompt_token_ids(prompt_ids)
        reasoning, content, calls = parser.parse(
            text, req, enable_auto_tools=True, model_output_token_ids=ids
        )
        fields = self._assemble(
            req, reasoning, content, calls, enable_auto_tools=True, parser_cls=self.cls
        )
        took = time.perf_counter() - start
        out = [[c.function.name, c.function.arguments] for c in fields.tool_calls or []]
        result = {"content": fields.content or "", "reasoning": fields.reasoning or ""}
        return {**result, "calls": out}, took

    def stream(
        self,
        tools: list[dict[str, Any]],
        texts: list[str],
        ids: list[list[int]],
        req: Any = None,
        kwargs: dict[str, Any] | None = None,
        prompt_ids: list[int] | None = None,
    ) -> Result:
        if req is None:
            kwargs = kwargs or self.default_kwargs
            req, _ = self.request(tools, kwargs=kwargs)
        parser = self.parser(req, kwargs)
        proc = self._processor_cls(req, parser, enable_auto_tools=True, parser_cls=self.cls)
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, list[str]] = {}
        took = 0.0
        last = len(texts) - 1
        prompt = prompt_ids if prompt_ids is not None else []
        for k, (text, delta_ids) in enumerate(zip(texts, ids, strict=True)):
            start = time.perf_counter()
            delta, _ = proc.step(text, delta_ids, "stop" if k == last else None, prompt)
            took += time.perf_counter() - start
            if delta is None:
                continue
            content.append(delta.content or "")
            reasoning.append(delta.reasoning or "")
            for call in delta.tool_calls or []:
                entry = calls.setdefault(call.index, ["", ""])
                if call.function is not None:
                    entry[0] += call.function.name or ""
                    entry[1] += call.function.arguments or ""
        out = [calls[i] for i in sorted(calls)]
        return {"content": "".join(content), "reasoning": "".join(reasoning), "calls": out}, took

    def run_case(self, case: dict[str, Any]) -> tuple[list[Result], dict[str, Any]]:
        kwargs = case.get("template_kwargs") or None
        prompt_ids = case.get("prompt_ids")
        req, skip = self.request(case["tools"], case.get("tool_choice", "auto"), kwargs, prompt_ids)
        # vllm/v1/engine/detokenizer.py: a stop token's text is never detokenized.
        trim = bool(case.get("stop"))
        ids = case["ids"]
        results = []
        for sizes in case["runs"]:
            try:
                if sizes is None:
                    text = full_text(self.tokenizer, ids, skip, trim)
                    results.append(self.batch(case["tools"], text, ids, req, kwargs, prompt_ids))
                else:
                    deltas = _chunks(ids, sizes)
                    texts = delta_texts(self.tokenizer, deltas, skip, trim)
                    results.append(
                        self.stream(case["tools"], texts, deltas, req, kwargs, prompt_ids)
                    )
            except Exception as exc:  # a peer's failure is a finding, not a crash
                results.append(({"error": _short(exc)}, 0.0))
        return results, {"skip_special_tokens": skip, "force_reasoning": None}


def from_source(module: str, debase: str | None = None) -> dict[str, Any]:
    """The namespace of an installed module, compiled from its own source file.

    Some SGLang modules cannot be imported in a CPU parser environment: their imports
    reach torchvision (multimodal configs). Their code is compiled unchanged instead,
    statement by statement: every top-level statement that can run does (the imports
    the parsing code uses all resolve); an import that fails is skipped. `debase`: a
    class compiled without its base class (whose module is such an import).
    """
    spec = find_spec(module)
    if spec is None or spec.origin is None:
        raise ImportError(f"{module} is not installed")
    source = Path(spec.origin).read_text(encoding="utf-8")
    flags = __future__.annotations.compiler_flag  # annotations stay unevaluated
    loaded = ModuleType(f"{module}_from_source")  # registered: dataclasses look it up
    sys.modules[loaded.__name__] = loaded
    namespace = loaded.__dict__
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == debase:
            node.bases, node.keywords = [], []
        code = compile(ast.Module([node], []), spec.origin, "exec", flags, dont_inherit=True)
        try:
            exec(code, namespace)
        except ImportError:
            continue  # machinery the parsing code does not use
    return namespace


def serving_chat_class() -> Any:
    """SGLang's `OpenAIServingChat` (its parsing methods are called on an instance made
    without `__init__`, holding the attributes those methods read)."""
    module = "sglang.srt.entrypoints.openai.serving_chat"
    return from_source(module, debase="OpenAIServingChat")["OpenAIServingChat"]


class SglangRunner:
    """SGLang 0.5.23: `OpenAIServingChat`'s own parsing methods, on the state they read."""

    name = "sglang"

    def __init__(
        self,
        spec: dict[str, Any],
        tokenizer: Any,
        in_reasoning: bool = False,
        template: str | None = None,
    ) -> None:
        protocol = import_module("sglang.srt.entrypoints.openai.protocol")
        detection = from_source("sglang.srt.parser.template_detection")
        rp = import_module("sglang.srt.parser.reasoning_parser")
        self._rp_cls = rp.ReasoningParser
        self._request_cls = protocol.ChatCompletionRequest
        self.spec = spec
        self.tokenizer = tokenizer
        self.template = template
        force, config = detection["detect_reasoning_pattern"](template)
        if template is None and in_reasoning:
            force = True  # the benchmark's fixed switch, without a template to read
        serving = serving_chat_class()
        srv = serving.__new__(serving)
        srv.tool_call_parser = spec["tool"]
        srv.reasoning_parser = spec.get("reasoning")
        srv.tokenizer_manager = SimpleNamespace(tokenizer=tokenizer)
        srv.template_manager = SimpleNamespace(force_reasoning=force, reasoning_config=config)
        srv._reasoning_detector = None
        if srv.reasoning_parser:  # as OpenAIServingChat.__init__ sets it
            srv._reasoning_detector = self._rp_cls(
                model_type=srv.reasoning_parser, stream_reasoning=True, tokenizer=tokenizer
            ).detector
        self.srv = srv
        self.default_kwargs = spec.get("template_kwargs") or None
        self._close_ids: set[int] | None = None

    def request(
        self, tools: list[dict[str, Any]], tool_choice: str = "auto", kwargs: Any = None
    ) -> tuple[Any, bool]:
        req = self._request_cls(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=tools or None,
            tool_choice=tool_choice,
            chat_template_kwargs=kwargs,
        )
        # serving_chat.py `_process_messages`: gpt-oss and Gemma 4 keep special tokens;
        # so does any request whose tools the tool parser will parse.
        if self.spec["tool"] in ("gpt-oss", "gemma4"):
            req.skip_special_tokens = False
        if self.srv._effective_tools(req) and req.tool_choice != "none":
            req.skip_special_tokens = False
        return req, bool(req.skip_special_tokens)

    def trims_stop(self, last_id: int) -> bool:
        """detokenizer_manager.py `trim_matched_stop`: is the final stop token's text cut?"""
        if self._close_ids is None:
            template = import_module("sglang.srt.parser.response_template")
            self._close_ids = set(template.tool_close_token_ids(self.spec["tool"], self.tokenizer))
        if last_id == 200012 and self.spec["tool"] == "gpt-oss":
            return False
        return last_id not in self._close_ids

    def force_reasoning(self, req: Any) -> bool:
        srv = self.srv
        return bool(srv.template_manager.force_reasoning or srv._get_reasoning_from_request(req))

    def batch(
        self, tools: list[dict[str, Any]], text: str, ids: list[int], req: Any = None
    ) -> Result:
        """`_build_chat_response`'s reasoning and tool-call steps."""
        srv = self.srv
        if req is None:
            req, _ = self.request(tools, kwargs=self.default_kwargs)
        start = time.perf_counter()
        reasoning = None
        answer_started = False
        if srv.reasoning_parser and req.separate_reasoning:
            parser = self._rp_cls(
                model_type=srv.reasoning_parser,
                stream_reasoning=False,
                force_reasoning=self.force_reasoning(req),
                request=req,
                tokenizer=self.tokenizer,
                tool_call_parser_active=srv._tool_call_parsing_active(req),
            )
            reasoning, text = parser.parse_non_stream(text)
            answer_started = srv._answer_started(parser)
        calls: list[list[str]] = []
        if srv._tool_call_parsing_active(req) and not answer_started:
            finish = {"type": "stop", "matched": None}
            tool_calls, text, _ = srv._process_tool_calls(
                text, srv._effective_tools(req), finish, req.tool_choice, 0, "", False
            )
            calls = [[c.function.name or "", c.function.arguments or ""] for c in tool_calls or []]
        took = time.perf_counter() - start
        return {"content": text or "", "reasoning": reasoning or "", "calls": calls}, took

    def stream(
        self, tools: list[dict[str, Any]], texts: list[str], ids: list[list[int]], req: Any = None
    ) -> Result:
        """`_generate_stream_content`'s reasoning and tool-call steps, delta by delta."""
        srv = self.srv
        if req is None:
            req, _ = self.request(tools, kwargs=self.default_kwargs)
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, list[str]] = {}
        reasoners: dict[int, Any] = {}
        parsers: dict[int, Any] = {}
        has_calls: dict[int, bool] = {}
        meta = {"meta_info": {"id": "x"}}
        took = 0.0
        last = len(texts) - 1

        def take(sse: str) -> None:
            data = json.loads(sse.removeprefix("data: ").strip())
            delta = data["choices"][0]["delta"]
            content.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning_content") or "")
            for call in delta.get("tool_calls") or []:
                entry = calls.setdefault(call["index"], ["", ""])
                entry[0] += call["function"].get("name") or ""
                entry[1] += call["function"].get("arguments") or ""

        async def tool_step(delta: str, finish: str | None) -> list[str]:
            return [
                chunk
                async for chunk in srv._process_tool_call_stream(
                    0, delta, parsers, meta, req, has_calls, created=0, flush=finish is not None
                )
            ]

        loop = asyncio.new_event_loop()
        try:
            for k, delta in enumerate(texts):
                finish = "stop" if k == last else None
                start = time.perf_counter()
                out: list[str] = []
                if srv.reasoning_parser and req.separate_reasoning:
                    said, delta = srv._process_reasoning_stream(
                        0, delta, reasoners, meta, req, finish
                    )
                    reasoning.append(said or "")
                if srv._tool_call_parsing_active(req) and not srv._answer_started(reasoners.get(0)):
                    out += [c for c in loop.run_until_complete(tool_step(delta, finish)) if c]
                    if finish is not None and 0 in parsers:
                        rest = srv._check_for_unstreamed_tool_args(parsers[0], meta, req, 0, 0)
                        if rest:
                            out.append(rest)
                elif delta:
                    content.append(delta)
                took += time.perf_counter() - start
                for sse in out:
                    take(sse)
        finally:
            loop.close()
        out_calls = [calls[i] for i in sorted(calls)]
        joined = {"content": "".join(content), "reasoning": "".join(reasoning)}
        return {**joined, "calls": out_calls}, took

    def run_case(self, case: dict[str, Any]) -> tuple[list[Result], dict[str, Any]]:
        kwargs = case.get("template_kwargs") or None
        req, skip = self.request(case["tools"], case.get("tool_choice", "auto"), kwargs)
        ids = case["ids"]
        trim = bool(case.get("stop")) and bool(ids) and self.trims_stop(ids[-1])
        force = self.force_reasoning(req) if self.srv.reasoning_parser else None
        results = []
        for sizes in case["runs"]:
            try:
                if sizes is None:
                    text = full_text(self.tokenizer, ids, skip, trim)
                    results.append(self.batch(case["tools"], text, ids, req))
                else:
                    deltas = _chunks(ids, sizes)
                    texts = delta_texts(self.tokenizer, deltas, skip, trim)
                    results.append(self.stream(case["tools"], texts, deltas, req))
            except Exception as exc:  # a peer's failure is a finding, not a crash
                results.append(({"error": _short(exc)}, 0.0))
        return results, {"skip_special_tokens": skip, "force_reasoning": force}


RUNNERS: dict[str, Any] = {"vllm": VllmRunner, "sglang": SglangRunner}


def load_hf_tokenizer(path: str) -> Any:
    fast = import_module("transformers").PreTrainedTokenizerFast
    return fast(tokenizer_file=path)


def versions() -> dict[str, str]:
    out = {}
    for name in ("vllm", "sglang", "transformers", "tokenizers", "openai-harmony"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def make_runner(job: dict[str, Any], tokenizer: Any) -> Any:
    if job["impl"] == "sglang":
        return SglangRunner(job["spec"], tokenizer, template=job.get("template"))
    if job["impl"] == "vllm+toolwire":
        # toolwire's vLLM plugin, loaded as `--tool-parser-plugin` loads it: its
        # `toolwire_<format>` parsers registered with vLLM's managers, then driven
        # exactly as vLLM's own parsers are.
        import_module("toolwire.integrations.vllm.plugin").register()
    # vllm/tokenizers/hf.py: the server's tokenizer is wrapped by get_cached_tokenizer
    # (vocabulary and special ids computed once, not per parser).
    cached = import_module("vllm.tokenizers.hf").get_cached_tokenizer
    return VllmRunner(job["spec"], cached(tokenizer))


def probe(job: dict[str, Any]) -> dict[str, Any]:
    """The settings each listed peer's code gives a request, without parsing anything.

    Job: {"probe": [{"impl", "spec", "tokenizer", "template", "tools"}], "env"}.
    Answer: {"settings": [{"auto": skip, "none": skip} | {"error": ...}]}.
    """
    os.environ.update(job.get("env") or {})
    out: list[dict[str, Any]] = []
    for item in job["probe"]:
        try:
            runner = make_runner(item, load_hf_tokenizer(item["tokenizer"]))
            seen = {}
            for choice in ("auto", "none"):
                if isinstance(runner, VllmRunner):
                    _, skip = runner.request(item["tools"], choice, None, [])
                else:
                    _, skip = runner.request(item["tools"], choice)
                seen[choice] = skip
            out.append(seen)
        except Exception as exc:  # reported per peer and format
            out.append({"error": _short(exc)})
    return {"settings": out, "versions": versions()}


def run(job: dict[str, Any]) -> dict[str, Any]:
    if "probe" in job:
        return probe(job)
    os.environ.update(job.get("env") or {})
    tokenizer = load_hf_tokenizer(job["tokenizer"])
    runner = make_runner(job, tokenizer)
    outcomes: list[list[dict[str, Any]]] = []
    seconds: list[list[float]] = []
    settings: list[dict[str, Any]] = []
    for case in job["cases"]:
        try:
            results, used = runner.run_case(case)
        except Exception as exc:  # the request itself failed: every run says why
            results = [({"error": _short(exc)}, 0.0) for _ in case["runs"]]
            used = {}
        outcomes.append([r for r, _ in results])
        seconds.append([t for _, t in results])
        settings.append(used)
    return {"outcomes": outcomes, "seconds": seconds, "settings": settings, "versions": versions()}


def main() -> int:
    """`python -m peers.worker JOB.json ANSWER.json`."""
    logging.disable(logging.CRITICAL)  # peers log every parse failure; outcomes say it
    with open(sys.argv[1], encoding="utf-8") as fh:
        job = json.load(fh)
    answer = run(job)
    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        json.dump(answer, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
