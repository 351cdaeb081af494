"""`toolwire check`: a conformance run any tool-call parser can be put through.

Cases come from real data (BFCL calls rendered in each native format, tokenized with
the real tokenizer; echoed, mixed, nested, truncated, undeclared, tool_choice-none and
special-token outputs; random ids), each with the request around it (tools,
tool_choice, thinking switch, prompt ids) and no output past a stop token. They are
fed in many chunkings to each implementation under test (an `Impl`: toolwire in held
and streaming-arguments modes here; others registered by a module `--impls-from`
names, such as the repository's `peers`: vLLM's and SGLang's parsers driven as their
servers drive them). Each case is judged on the defect properties in
`properties.py`, and what each implementation does under a policy is described;
`report.py` writes both tables.

Modules, in data-flow order: `corpus` (BFCL) -> `setup`/`prompts` (each format's
tokenizer, template, thinking switch and stop tokens; requests and stop ids) ->
`cases` + `sweeps` -> `impls` (the `Impl` protocol, the registry, toolwire's own) ->
`properties` -> `run` -> `report` (+ `chart`); `command` is the CLI.
"""

from __future__ import annotations

from toolwire.check.impls import Impl, ImplRun, Target, register
from toolwire.check.run import CheckOptions, CheckResults, run_check
from toolwire.check.setup import Setup, register_setups

__all__ = [
    "CheckOptions",
    "CheckResults",
    "Impl",
    "ImplRun",
    "Setup",
    "Target",
    "register",
    "register_setups",
    "run_check",
]
