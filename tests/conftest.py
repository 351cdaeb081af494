"""Fixtures, the hypothesis profile and the suite's two tiers; the helpers live in named
modules (`tests/data.py` for the shared data, `tests/vocabulary.py`, `tests/cases.py`, ...).

The tiers::

    unit          the library's modules on the in-repository synthetic vocabulary
                  (tests/vocabulary.py): no shared data, no server, no XGrammar compile
                  on a real vocabulary                 make test-fast (pytest --fast)
    integration   real tokenizers and corpora (../shared), servers on loopback HTTP and
                  the embedded llama.cpp engine, grammar agreement on real
                  vocabularies, pytest and the CLI in subprocesses
                                                       make test (both tiers)

A test is integration when its module is in `INTEGRATION` (with the reason) or it is
marked `@pytest.mark.integration`; every other test is unit. `--fast` deselects the
integration tier, hides the shared data (so `cases.standalone_tokenizer` is the synthetic
vocabulary, and a unit test that needs the data is skipped, the reason saying so), runs
as without the `grammar` extra (XGrammar unimportable: tags are built, not compiled)
and runs fewer property examples. `-m integration` or `-m "not integration"` selects one
tier with the data present.
"""

from __future__ import annotations

import atexit
import gc
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Generator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import beside, cases
from tests.data import EXTRAS, FAST_TIER, TIER, data_dir, missing_extra, tokenizer_for
from toolwire import Tokenizer

#: Modules whose tests are integration tests, and why.
INTEGRATION: dict[str, str] = {
    "test_beside.py": "pytest sessions in subprocesses",
    "test_bfcl_roundtrip.py": "BFCL corpora on every format's real tokenizer",
    "test_check.py": "toolwire check on BFCL, in subprocesses",
    "test_core_cases.py": "Qwen3's real vocabulary",
    "test_derived.py": "derived vocabularies built from Qwen3's, in subprocesses",
    "test_detect.py": "every chat template and vocabulary of the shared data",
    "test_engine_bodies.py": "vLLM's and SGLang's own code (.venv-bench)",
    "test_formats_families.py": "facts of each family's real or derived vocabulary",
    "test_formats_newest.py": "facts of each family's derived vocabulary",
    "test_formats_unwrapped_calls.py": "facts of each family's real vocabulary",
    "test_formats_wrapped_calls.py": "facts of each family's real or derived vocabulary",
    "test_fuzz.py": "BFCL-rendered outputs on real tokenizers",
    "test_grammar.py": "XGrammar compiles on real vocabularies",
    "test_grammar_agreement.py": "XGrammar compiles and walks on real vocabularies",
    "test_grammar_bounds.py": "XGrammar compiles on Qwen3's vocabulary",
    "test_grammar_service.py": "the embedded server and XGrammar",
    "test_prompt_call_ids.py": "Kimi K2's real chat templates",
    "test_prompt_fields.py": "the real chat templates and their vocabularies",
    "test_prompt_inert.py": "every real chat template and its vocabulary",
    "test_prompt_isolation.py": "real and derived vocabularies and chat templates",
    "test_prompt_parity.py": "transformers' rendering of the real chat templates",
    "test_prompt_roles.py": "every real chat template and its vocabulary",
    "test_server_agent_embedded.py": "the embedded llama.cpp server",
    "test_server_agent_remote.py": "servers on loopback HTTP",
    "test_server_auth.py": "servers on loopback HTTP and the official clients",
    "test_server_echo.py": "servers on loopback HTTP",
    "test_server_embedded.py": "the embedded llama.cpp server",
    "test_server_embedded_context.py": "toolwire serve on the embedded llama.cpp server",
    "test_server_faults.py": "servers on loopback HTTP",
    "test_server_formats.py": "servers on loopback HTTP, every format",
    "test_server_guidance.py": "servers on loopback HTTP on real vocabularies",
    "test_server_health.py": "servers on loopback HTTP",
    "test_server_remote.py": "servers on loopback HTTP",
    "test_server_store.py": "a real redis-server, processes sharing SQLite, toolwire serve",
    "test_server_tracing.py": "servers on loopback HTTP and in-process OTLP collectors",
    "test_server_workers.py": "toolwire serve --workers 2 on the embedded model",
    "test_standalone.py": "pytest in subprocesses",
    "test_tokenizer.py": "the shared tokenizer files",
    "test_vllm_plugin.py": "vLLM's plugin interface on real tokenizers",
    "test_vllm_real.py": "a real vLLM server",
}

# `toolwire serve` started by tests keeps its stored responses in this run's own file,
# not in the user's cache directory (tests of the default path pass their own); the
# folder goes with the run.
if "TOOLWIRE_STORE" not in os.environ:
    _STORE = tempfile.mkdtemp(prefix="toolwire-test-")
    atexit.register(shutil.rmtree, _STORE, True)
    os.environ["TOOLWIRE_STORE"] = os.path.join(_STORE, "responses.sqlite3")

# Every embedded engine a test starts (`toolwire serve`, `create_app`) evaluates on one
# thread: the suite runs two processes on two cores, and llama.cpp's threads spin while
# they wait for each other, so a second thread makes a prefill crawl under load.
os.environ.setdefault("TOOLWIRE_THREADS", "1")

#: Modules whose items run in a pytest process beside the session (tests/beside.py),
#: in this order, and why: sharing nothing with the rest, busy on a core of their own
#: (the engine's prefill first, while the session's modules need no llama.cpp), so on
#: two cores they overlap it.
BESIDE: dict[str, str] = {
    "test_server_embedded_context.py": "a 4.5k-token prefill on the embedded engine",
    "test_grammar_agreement.py": "XGrammar and llguidance compiles and walks, every format",
    "test_invariants.py": "the parser's property tests, every format",
    "test_prompt_parity.py": "transformers' apply_chat_template on every template",
}

#: Property-test examples per tier (TOOLWIRE_EXAMPLES overrides both).
EXAMPLES = {"fast": 50, "full": 200}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        default=False,
        help="the unit tier only, on the synthetic vocabulary (make test-fast)",
    )


def pytest_configure(config: pytest.Config) -> None:
    fast = bool(config.getoption("fast"))
    if fast:  # before any test module is imported
        os.environ[TIER] = FAST_TIER
        # As without the `grammar` extra: tags are built, not compiled (importing
        # XGrammar alone, with torch, takes seconds).
        sys.modules.setdefault("xgrammar", None)  # type: ignore[arg-type]
    # Property tests: a few hundred examples per property in CI; more with
    # TOOLWIRE_EXAMPLES=5000 make test.
    default = EXAMPLES["fast" if fast else "full"]
    settings.register_profile(
        "toolwire",
        max_examples=int(os.environ.get("TOOLWIRE_EXAMPLES", default)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=os.environ.get("TOOLWIRE_RANDOM_SEED") is None,
    )
    settings.load_profile("toolwire")
    if beside.inside():
        config.pluginmanager.register(beside.Sender(config), "beside-sender")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in INTEGRATION:
            item.add_marker(pytest.mark.integration)
    _group_by_format(items, "test_grammar_agreement.py")
    if config.getoption("fast"):
        kept, dropped = [], []
        for item in items:
            (dropped if item.get_closest_marker("integration") else kept).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
    beside.arrange(config, items, list(BESIDE))


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built lives for the session (the parametrized cases): frozen out
    of the garbage collector, so that its full collections do not walk it again for
    every test. Then the beside process starts (tests/beside.py)."""
    gc.freeze()
    beside.start(session)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> bool | None:
    """An item that runs beside is reported from there."""
    return True if beside.relay(item) else None


def pytest_sessionfinish(session: pytest.Session) -> None:
    beside.close()


def _group_by_format(items: list[pytest.Item], module: str) -> None:
    """`module`'s items ordered by their `fmt` parameter's test vocabulary, then by the
    format (each first seen first, otherwise in collection order), those without one
    last: the module can then hold one vocabulary's grammar objects at a time, and the
    formats sharing a vocabulary share them."""
    at = [n for n, item in enumerate(items) if item.path.name == module]
    if not at:
        return
    order: dict[object, int] = {}

    def key(item: pytest.Item) -> tuple[int, int]:
        callspec = getattr(item, "callspec", None)
        fmt = callspec.params.get("fmt") if callspec is not None else None
        if fmt is None:
            return (len(items), len(items))
        return (
            order.setdefault(cases.vocabulary(fmt), len(order)),
            order.setdefault(fmt, len(order)),
        )

    mine = sorted((items[n] for n in at), key=key)
    for n, item in zip(at, mine, strict=True):
        items[n] = item


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Free the apps a finished test built: FastAPI memoizes every endpoint it has
    classified (lru_caches of up to 4096 callables in `fastapi.dependencies.models`),
    which would keep each app, its engine and its tokenizer alive for the session."""
    models = sys.modules.get("fastapi.dependencies.models")
    for value in vars(models).values() if models is not None else ():
        clear = getattr(value, "cache_clear", None)
        if callable(clear):
            clear()


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A test module that imports an optional extra's package which is not installed is
    skipped, the reason naming the extra (as `tests.data.needs` skips a test)."""
    report = yield
    if report.failed and isinstance(collector, pytest.Module):
        found = _MISSING.search(str(report.longrepr))
        package = (found.group(1) or found.group(2)) if found else ""
        if package.split(".", 1)[0] in EXTRAS:
            where = (str(collector.path), 0, f"Skipped: {missing_extra(package)}")
            return pytest.CollectReport(report.nodeid, "skipped", where, [])
    return report


#: How Python says a package is not there (absent, or blocked in `sys.modules`).
_MISSING = re.compile(r"No module named '([\w.]+)'|import of ([\w.]+) halted")


def pytest_report_header(config: pytest.Config) -> str:
    if config.getoption("fast"):
        return "tier: unit (--fast: synthetic vocabulary, no shared data)"
    return "tier: unit and integration"


@pytest.fixture(scope="session")
def shared() -> Path:
    return data_dir()


@pytest.fixture(scope="session")
def load() -> Callable[[str], Tokenizer]:
    return tokenizer_for
