# The two commands that matter: `make demo` (a real episode end to end) and `make test` (the suite).
# Before a merge: `make lint` (ruff, mypy --strict) and `make test-all-pythons` (`make test`'s suite on 3.12 and 3.13).
# `make test-clients`: Claude Code, Codex, Gemini CLI, Copilot CLI, Cline and Qwen Code, pinned, from npm (cached in
# .venv/clients),
# run for real against a fake model API; minutes, so `make test` leaves tests/real_clients out.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The suite runs on pytest-xdist workers, one per core (`make test TEST_WORKERS=0` runs it in one process);
# worksteal: an idle worker takes queued tests from a busy one, so the 20-35 s stress tests do not end the run alone
TEST_WORKERS ?= auto

# `make test` is 3.11, the oldest Python requires-python admits; these get a venv each, .venv-3.12 and so on
OTHER_PYTHONS := 3.12 3.13
PYENV_ROOT_DIR = $(shell pyenv root 2>/dev/null || echo "$${PYENV_ROOT:-$$HOME/.pyenv}")
# pyenv's newest build of a minor version, else pythonX.Y on PATH if it really runs (a pyenv shim may not)
find_python = $(or $(shell ls -d $(PYENV_ROOT_DIR)/versions/$(1).*/bin/python$(1) 2>/dev/null | sort -V | tail -n 1),$(shell python$(1) -c pass >/dev/null 2>&1 && command -v python$(1)))

.PHONY: demo test test-slow test-everything test-clients lint test-all-pythons bench docs clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.runtime: pyproject.toml scripts/majordomus-hook $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.dev: pyproject.toml scripts/majordomus-hook $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.runtime

demo: $(VENV)/.runtime
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

# The suite starts the executables thousands of times: with PYTHONDONTWRITEBYTECODE set (as on these machines)
# each start would compile src/majordomus again, ~30 ms for a CLI command and ~100 ms for majordomus-mcp.
# compileall writes the bytecode once (into the ignored __pycache__/); a stale one is simply recompiled.
# pytest runs with bytecode writing on (an empty PYTHONDONTWRITEBYTECODE): else each worker rewrote the asserts
# of every test module again at collection (~2.5 CPU-s a worker); the rewritten modules stay in __pycache__/ too.
WRITE_BYTECODE := PYTHONDONTWRITEBYTECODE=
# `make test` leaves out the tests marked slow (stress loops, kills at random moments, generated inputs by the
# thousand, mypy, schemathesis, the Inspector): `make test-slow` runs exactly those, and CI runs both, so every
# test still runs on every CI run; `make test-everything` is both in one pytest run.
test: $(VENV)/.dev
	$(BIN)/python -m compileall -q src/majordomus
	$(WRITE_BYTECODE) PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not slow"
	@# the hook ratio, CI-sized: a printed report, never an assertion on wall-clock
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python bench/hook_latency.py --rounds 8

test-slow: $(VENV)/.dev
	$(BIN)/python -m compileall -q src/majordomus
	$(WRITE_BYTECODE) PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal -m slow

test-everything: $(VENV)/.dev
	$(BIN)/python -m compileall -q src/majordomus
	$(WRITE_BYTECODE) PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

# Two pytest-xdist workers, each client's tests in one of them (tests/real_clients/conftest.py: group_of); the
# clients mostly wait on their model and their terminal, so two share the two cores. `CLIENT_WORKERS=0`: one process.
CLIENT_WORKERS ?= 2
test-clients: $(VENV)/.dev
	@start=$$(date +%s); \
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest tests/real_clients -rxXs -n $(CLIENT_WORKERS) --dist loadgroup; rc=$$?; \
	echo "== test-clients took $$(( $$(date +%s) - start )) s, pytest exited $$rc"; \
	exit $$rc

lint: $(VENV)/.dev
	$(BIN)/ruff check src tests bench scripts/majordomus-hook
	$(BIN)/python -m mypy --strict src/majordomus src/majordomus_hook.py scripts/majordomus-hook

test-all-pythons:
	@for v in $(OTHER_PYTHONS); do $(MAKE) --no-print-directory test-python-$$v || exit 1; done

# The suite but its slow tests (what `make test` runs) with one other Python, timed; a Python this machine lacks is
# said and skipped, not failed. The slow tests (stress loops, kills at random moments, mypy, schemathesis, the
# Inspector) run on 3.11 in `make test-slow`: what they hold does not change with the interpreter, and twice more
# would cost CI about 250 s. `make test-python-3.12 SUITE=` runs the whole suite there.
SUITE ?= -m "not slow"
test-python-%:
	@py="$(call find_python,$*)"; \
	if [ -z "$$py" ]; then \
	  echo "test-all-pythons: skipped Python $*: neither $(PYENV_ROOT_DIR)/versions/$*.*/bin/python$* nor a working python$* on PATH exists."; \
	  exit 0; \
	fi; \
	$(MAKE) --no-print-directory .venv-$*/.dev PYTHON_FOR_VENV="$$py" || exit 1; \
	echo "== Python $* ($$py)"; \
	start=$$(date +%s); \
	.venv-$*/bin/python -m compileall -q src/majordomus; \
	$(WRITE_BYTECODE) PATH="$(CURDIR)/.venv-$*/bin:$$PATH" .venv-$*/bin/python -m pytest -n $(TEST_WORKERS) --dist worksteal $(SUITE); \
	rc=$$?; \
	echo "== Python $*: the suite ($(or $(SUITE),whole)) took $$(( $$(date +%s) - start )) s, pytest exited $$rc"; \
	exit $$rc

.PRECIOUS: .venv-%/bin/python  # made by a pattern rule, so make would delete it as intermediate
.venv-%/bin/python:
	$(PYTHON_FOR_VENV) -m venv .venv-$*
	.venv-$*/bin/python -m pip install -q --upgrade pip

.venv-%/.dev: pyproject.toml .venv-%/bin/python
	.venv-$*/bin/python -m pip install -q -e '.[dev]'
	touch $@

bench: $(VENV)/.dev
	PATH="$(CURDIR)/$(BIN):$$PATH" sh -c 'for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done'

docs: $(VENV)/.runtime
	$(BIN)/python -m majordomus.capabilities.projections --write-docs

clean-venv:
	rm -rf $(VENV) $(addprefix .venv-,$(OTHER_PYTHONS))
