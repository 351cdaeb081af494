"""Runs a peer's parsers (vLLM or SGLang) on conformance or benchmark jobs.

Runs in the peers' virtual environment (`.venv-bench`, see the Makefile), started by
`toolwire check` / the benchmark as `python -m toolwire.check.worker`: one JSON job on
file in, one JSON answer file out. The peers are fed as their servers feed them: the
incremental detokenization of each delta (special tokens kept) and the delta's ids;
vLLM through `ChatStreamProcessor.step` (streaming) and `parser.parse`
(non-streaming), SGLang through `ReasoningParser` then `FunctionCallParser`
(`parse_stream_chunk`/`parse_stream_end`, then the server's own top-up of unstreamed
arguments; `parse_non_stream`). Only those parser calls are timed.

Job: {"impl", "spec": {tool, reasoning, harmony, template_kwargs}, "tokenizer": path
to a tokenizer.json, "in_reasoning": bool, "env": {...},
"cases": [{"tools": [...], "runs": [{"mode": "batch"|"stream", "texts": [...],
"ids": [[...]]}]}]}.
Answer: {"outcomes": [[{content, reasoning, calls, error}]], "seconds": [[float]]}.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from importlib import import_module
from typing import Any

__all__ = ["main"]


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


class VllmRunner:
    """vLLM 0.33: ParserManager's parser class, driven through the server's processor."""

    def __init__(self, spec: dict[str, Any], tokenizer: Any, in_reasoning: bool) -> None:
        manager = import_module("vllm.parser.parser_manager").ParserManager
        protocol = import_module("vllm.entrypoints.openai.chat_completion.protocol")
        stream = import_module("vllm.entrypoints.openai.chat_completion.stream_processor")
        self._request_cls = protocol.ChatCompletionRequest
        self._processor_cls = stream.ChatStreamProcessor
        self.cls = manager.get_parser(
            tool_parser_name=spec["tool"],
            enable_auto_tools=True,
            reasoning_parser_name=spec.get("reasoning"),
            is_harmony=bool(spec.get("harmony")),
        )
        self.kwargs = spec.get("template_kwargs") or None
        self.tokenizer = tokenizer

    def request(self, tools: list[dict[str, Any]]) -> Any:
        return self._request_cls(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=tools,
            tool_choice="auto",
            chat_template_kwargs=self.kwargs,
        )

    def batch(
        self, tools: list[dict[str, Any]], text: str, ids: list[int]
    ) -> tuple[dict[str, Any], float]:
        req = self.request(tools)
        parser = self.cls(self.tokenizer, req.tools, chat_template_kwargs=self.kwargs)
        start = time.perf_counter()
        reasoning, content, calls = parser.parse(
            text, req, enable_auto_tools=True, model_output_token_ids=ids
        )
        took = time.perf_counter() - start
        out = [[c.name, c.arguments] for c in calls or []]
        return {"content": content or "", "reasoning": reasoning or "", "calls": out}, took

    def stream(
        self, tools: list[dict[str, Any]], texts: list[str], ids: list[list[int]]
    ) -> tuple[dict[str, Any], float]:
        req = self.request(tools)
        parser = self.cls(self.tokenizer, req.tools, chat_template_kwargs=self.kwargs)
        proc = self._processor_cls(req, parser, enable_auto_tools=True, parser_cls=self.cls)
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, list[str]] = {}
        took = 0.0
        last = len(texts) - 1
        for k, (text, delta_ids) in enumerate(zip(texts, ids, strict=True)):
            start = time.perf_counter()
            delta, _ = proc.step(text, delta_ids, "stop" if k == last else None, [])
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


class SglangRunner:
    """SGLang 0.5.23: ReasoningParser, then FunctionCallParser, as serving_chat runs them."""

    def __init__(self, spec: dict[str, Any], tokenizer: Any, in_reasoning: bool) -> None:
        fc = import_module("sglang.srt.function_call.function_call_parser")
        rp = import_module("sglang.srt.parser.reasoning_parser")
        protocol = import_module("sglang.srt.entrypoints.openai.protocol")
        self._fc_cls = fc.FunctionCallParser
        self._rp_cls = rp.ReasoningParser
        self._tool_cls, self._function_cls = protocol.Tool, protocol.Function
        self.spec = spec
        self.force = True if in_reasoning else None

    def tools(self, tools: list[dict[str, Any]]) -> list[Any]:
        return [
            self._tool_cls(type="function", function=self._function_cls(**t["function"]))
            for t in tools
        ]

    def reasoner(self, stream: bool) -> Any:
        if not self.spec.get("reasoning"):
            return None
        return self._rp_cls(
            model_type=self.spec["reasoning"],
            stream_reasoning=stream,
            force_reasoning=self.force,
            tool_call_parser_active=True,
        )

    def batch(
        self, tools: list[dict[str, Any]], text: str, ids: list[int]
    ) -> tuple[dict[str, Any], float]:
        declared = self.tools(tools)
        start = time.perf_counter()
        reasoning = None
        rp = self.reasoner(False)
        if rp is not None:
            reasoning, text = rp.parse_non_stream(text)
        parser = self._fc_cls(tools=declared, tool_call_parser=self.spec["tool"])
        calls: list[list[str]] = []
        text = text or ""
        if parser.has_tool_call(text):
            text, items = parser.parse_non_stream(text)
            calls = [[i.name or "", i.parameters or ""] for i in items]
        took = time.perf_counter() - start
        return {"content": text or "", "reasoning": reasoning or "", "calls": calls}, took

    def stream(
        self, tools: list[dict[str, Any]], texts: list[str], ids: list[list[int]]
    ) -> tuple[dict[str, Any], float]:
        declared = self.tools(tools)
        took = 0.0
        rp = self.reasoner(True)
        parser = self._fc_cls(tools=declared, tool_call_parser=self.spec["tool"])
        content: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, list[str]] = {}
        last = len(texts) - 1
        for k, delta in enumerate(texts):
            start = time.perf_counter()
            final = k == last
            if rp is not None:
                r, delta = rp.parse_stream_chunk(delta)
                if final:
                    end_r, end_n = rp.parse_stream_end()
                    r, delta = (r or "") + (end_r or ""), (delta or "") + (end_n or "")
                reasoning.append(r or "")
            normal, items = parser.parse_stream_chunk(delta or "")
            if final:
                end_text, end_items = parser.parse_stream_end()
                normal, items = (normal or "") + (end_text or ""), list(items) + list(end_items)
            extra = self._unstreamed(parser) if final else None
            took += time.perf_counter() - start
            content.append(normal or "")
            for item in items:
                entry = calls.setdefault(item.tool_index, ["", ""])
                entry[0] += item.name or ""
                entry[1] += item.parameters or ""
            if extra is not None:
                calls.setdefault(extra[0], ["", ""])[1] += extra[1]
        out = [calls[i] for i in sorted(calls)]
        return {"content": "".join(content), "reasoning": "".join(reasoning), "calls": out}, took

    @staticmethod
    def _unstreamed(parser: Any) -> tuple[int, str] | None:
        """serving_chat's `_check_for_unstreamed_tool_args`, at the end of a stream."""
        detector = getattr(parser, "detector", parser)
        prev = getattr(detector, "prev_tool_call_arr", None)
        streamed = getattr(detector, "streamed_args_for_tool", None)
        if not prev or not streamed:
            return None
        index = len(prev) - 1
        if index < 0 or index >= len(streamed):
            return None
        expected = prev[index].get("arguments", {})
        if not isinstance(expected, str):
            expected = json.dumps(expected, ensure_ascii=False)
        actual = streamed[index]
        remaining = expected[len(actual) :] if expected.startswith(actual) else ""
        return (index, remaining) if remaining else None


RUNNERS: dict[str, Any] = {"vllm": VllmRunner, "sglang": SglangRunner}


def load_hf_tokenizer(path: str) -> Any:
    fast = import_module("transformers").PreTrainedTokenizerFast
    return fast(tokenizer_file=path)


def run(job: dict[str, Any]) -> dict[str, Any]:
    os.environ.update(job.get("env") or {})
    tokenizer = load_hf_tokenizer(job["tokenizer"])
    runner = RUNNERS[job["impl"]](job["spec"], tokenizer, bool(job.get("in_reasoning")))
    outcomes: list[list[dict[str, Any]]] = []
    seconds: list[list[float]] = []
    for case in job["cases"]:
        case_out: list[dict[str, Any]] = []
        case_sec: list[float] = []
        for spec in case["runs"]:
            try:
                if spec["mode"] == "batch":
                    result, took = runner.batch(case["tools"], spec["texts"][0], spec["ids"][0])
                else:
                    result, took = runner.stream(case["tools"], spec["texts"], spec["ids"])
            except Exception as exc:  # a peer's failure is a finding, not a crash
                result, took = {"error": _short(exc)}, 0.0
            case_out.append(result)
            case_sec.append(took)
        outcomes.append(case_out)
        seconds.append(case_sec)
    return {"outcomes": outcomes, "seconds": seconds}


def main() -> int:
    """`python -m toolwire.check.worker JOB.json ANSWER.json`."""
    logging.disable(logging.CRITICAL)  # peers log every parse failure; outcomes say it
    with open(sys.argv[1], encoding="utf-8") as fh:
        job = json.load(fh)
    answer = run(job)
    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        json.dump(answer, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
