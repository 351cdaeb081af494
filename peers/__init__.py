"""The peers (vLLM 0.33, SGLang 0.5.23) and this repository's format setups, for
`toolwire check`; not part of the installed package.

Importing `peers` registers, with `toolwire.check`:

* the setups of every format in `profiles.PROFILES` (tokenizer, chat template, thinking
  switch, stop tokens, as found under the shared data folder), their tokenizers loaded
  by `vocab.tokenizer_for` (which also builds the derived vocabularies of families
  whose vocabulary is not available offline);
* the implementations `vllm` and `sglang` (`impls.PeerImpl`: `worker.py` in the
  peers' virtual environment drives each peer's parsers as its server does) and
  `vllm+toolwire` (`vllm_plugin.py`: toolwire's vLLM plugin through the same path).

`toolwire check --impls-from peers` (from the repository root, as `make check` runs
it) imports it; the tests and the benchmarks import its modules directly.

Modules: `profiles` (per-format setups, the peers' parser names and the lines of their
server code the worker follows) -> `vocab` (tokenizers, derived vocabularies) ->
`impls` (the job per format) -> `worker` (runs in the peers' environment; its
runners also serve `bench/parsers.py`); `vllm_plugin`.
"""

from __future__ import annotations

from peers.impls import PeerImpl
from peers.profiles import PROFILES, SGLANG_DRIVING, VLLM_DRIVING
from peers.vllm_plugin import PLUGIN
from peers.vocab import tokenizer_for
from toolwire.check.impls import register
from toolwire.check.setup import register_setups

register_setups(PROFILES, tokenizer_for)
register(
    PeerImpl(
        "vllm",
        "vLLM's parsers through its server's streaming/non-streaming path",
        ("vLLM's server code the run follows (under site-packages)", VLLM_DRIVING),
    )
)
register(
    PeerImpl(
        "sglang",
        "SGLang's parsers through its server's serving_chat methods",
        ("SGLang's server code the run follows", SGLANG_DRIVING),
    )
)
register(PLUGIN)
