# Two commands: `make run` (the app on the embedded default pair) and `make test`.
# Each creates or updates .venv, installs the project, fetches the default model if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/specdec-tui fetch
	$(BIN)/specdec-tui $(ARGS)

test: $(STAMP)
	$(BIN)/specdec-tui fetch
	$(BIN)/ruff check core tui tests
	$(BIN)/python -m pytest -q -n auto --dist loadscope $(PYTEST_ARGS)

clean:
	rm -rf $(VENV)
