# jetcron: `make up` runs everything on this machine; `make test` runs the whole suite.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up test test-fast chaos lint typecheck schemas bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

up: $(STAMP)
	$(BIN)/jetcron up

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not chaos" -p no:cacheprovider

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit -p no:cacheprovider

chaos: $(STAMP)
	$(BIN)/python -m pytest -q tests/chaos -m "chaos or slow" -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check libs services tests bench

# mypy cannot follow the jetcron -> libs mapping of the editable install; give it a path that can.
typecheck: $(STAMP)
	mkdir -p build/mypy && ln -sfn ../../libs build/mypy/jetcron
	MYPYPATH=build/mypy $(BIN)/mypy -p jetcron

schemas: $(STAMP)
	$(BIN)/python -m jetcron.wire.schema schemas

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .jetcron .pytest_cache .mypy_cache .ruff_cache
