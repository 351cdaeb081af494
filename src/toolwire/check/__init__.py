"""`toolwire check`: a conformance run any tool-call parser can be put through.

Cases come from real data (BFCL calls rendered in each native format, tokenized with
the real tokenizer; echoed, mixed, nested, truncated, undeclared, tool_choice-none and
special-token outputs; random ids), each with the request around it (tools,
tool_choice, thinking switch, prompt ids) and no output past a stop token. They are
fed in many chunkings to toolwire (held and streaming-arguments modes) and, through
`worker.py` in the peers' virtual environment, to vLLM's and SGLang's parsers driven
as their servers drive them. Each case is judged on the defect properties in
`properties.py`, and what each implementation does under a policy is described;
`report.py` writes both tables.

Modules, in data-flow order: `corpus` (BFCL) -> `vocab`/`profiles`/`prompts`
(tokenizer, peers' settings, requests and stop tokens per format) -> `cases` +
`sweeps` -> `impls` (+ `worker`; `vllm_plugin` registers `vllm+toolwire`) ->
`properties` -> `run` -> `report` (+ `chart`).
"""

from __future__ import annotations

from toolwire.check.run import CheckOptions, CheckResults, run_check

__all__ = ["CheckOptions", "CheckResults", "run_check"]
