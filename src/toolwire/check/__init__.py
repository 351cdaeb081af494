"""`toolwire check`: a conformance run any tool-call parser can be put through.

Cases come from real data (BFCL calls rendered in each native format, tokenized with
the real tokenizer; echoed, mixed, nested, truncated, undeclared and special-token
outputs; random ids) and are fed in many chunkings to toolwire and, through
`worker.py` in the peers' virtual environment, to vLLM's and SGLang's parsers. Each
case is judged on the properties in `properties.py`; `report.py` writes the matrix.

Modules, in data-flow order: `corpus` (BFCL) -> `vocab`/`profiles` (tokenizer and
peer parser names per format) -> `cases` + `sweeps` -> `impls` (+ `worker`) ->
`properties` -> `run` -> `report` (+ `chart`).
"""

from __future__ import annotations

from toolwire.check.run import CheckOptions, CheckResults, run_check

__all__ = ["CheckOptions", "CheckResults", "run_check"]
