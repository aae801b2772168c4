# The two commands that matter: `make demo` (a real episode end to end) and `make test` (the suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench docs clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.runtime: pyproject.toml $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.dev: pyproject.toml $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.runtime

demo: $(VENV)/.runtime
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

test: $(VENV)/.dev
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest

bench: $(VENV)/.dev
	PATH="$(CURDIR)/$(BIN):$$PATH" sh -c 'for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done'

docs: $(VENV)/.runtime
	$(BIN)/python -m majordomus.capabilities.projections --write-docs

clean-venv:
	rm -rf $(VENV)
