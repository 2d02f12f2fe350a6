# `make run TASK="..."` sets up and runs a task; `make test` sets up and runs the tests.
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

test: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider

bench: setup
	$(BIN)/python benchmarks/storage_and_overhead.py

.PHONY: setup run test bench
