# Quick start: `make demo` and `make test` each work alone on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-all lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,dev,demo,plot,ray,gpu,view]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/hyperframes demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" tests

test-all: $(STAMP)
	$(BIN)/python -m pytest -q tests

lint: $(STAMP)
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
