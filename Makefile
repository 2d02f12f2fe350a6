# `make run TASK="..."` sets up and runs a task; `make test` sets up and runs the tests (lint,
# types, import contracts, then the whole suite); `make check` is the fast loop: the same
# checks with the unit tests only (tests/unit_tests.txt), two at a time; `make test-fast` is
# the same target under the name people look for.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/artifactflow: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	touch $@

setup: $(BIN)/artifactflow

run: setup
	$(BIN)/artifactflow run "$(TASK)"

test: lint types contracts shape
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider $(PYTEST_PARALLEL) --durations=20

check: setup
	$(MAKE) --no-print-directory -j2 --output-sync=target lint types contracts shape unit

test-fast: check

# the whole suite on a busy machine: two CPU burners beside it, and no bytecode writes
test-loaded: setup
	PYTHONDONTWRITEBYTECODE=1 $(BIN)/python scripts/with_cpu_load.py 2 -- $(MAKE) --no-print-directory test

lint: setup
	$(BIN)/ruff check src tests benchmarks scripts

types: setup
	$(BIN)/pyright

contracts: setup
	$(BIN)/lint-imports

# module length, no private imports of dependencies, tables only from numbered schema steps
shape: setup
	$(BIN)/python scripts/check_shape.py

unit: setup
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider @tests/unit_tests.txt

bench: setup
	$(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python benchmarks/peers.py

.PHONY: setup run test check test-fast test-loaded lint types contracts shape unit bench
