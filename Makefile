# Two commands: `make run` (the app on the embedded default pair) and `make test`.
# Each creates or updates .venv, installs the project, fetches the default model if missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# `make run` installs what running needs; `make test` adds the test tools (issue 29: run
# installed pytest, ruff and the snapshot plugin too).
RUN_STAMP := $(VENV)/.installed-run
# setuptools says "Editable installation: be careful with folders named like your package" on
# every editable install of a project that maps a folder to a package (profiles/ ships as
# specdec_tui_presets); it is information, not a fault, and only that message is silenced.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"
# pip byte-compiles what it installs one file after another (13 of its 21 s here); compileall
# does the same files on every core (7 s on two). A file that does not compile is left to the
# interpreter, which says so if it is ever imported: pip leaves it so too.
INSTALL := $(QUIET_EDITABLE) $(BIN)/python -m pip install -q --no-compile
COMPILE := $(BIN)/python -m compileall -q -j 0 \
	"$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" >/dev/null || true
TEST_STAMP := $(VENV)/.installed-test
# One pytest-xdist worker per core and one more: about a quarter of the suite waits (the app's
# pilot pauses, launched ranks, subprocesses), which the extra worker fills. On the 2-core
# machine a fresh clone's pytest took 373 s with 3 workers against 407 s with 2 (2026-12-06).
WORKERS ?= $(shell $(PYTHON) -c "import os; print((os.cpu_count() or 1) + 1)")
# The suite writes bytecode (into the checkout's ignored __pycache__/) even where the environment
# turns it off (PYTHONDONTWRITEBYTECODE is set on this machine): otherwise each worker
# and each of the suite's Python subprocesses (CLI runs, launched ranks, faults) compiles the
# project from source and pytest rewrites every test module's asserts again (~4 s of CPU per
# worker at collection alone). A fresh clone's `make test`: 7 min 8 s with it off, 6 min 40 s on.
WRITE_BYTECODE := PYTHONDONTWRITEBYTECODE=

.PHONY: run test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(INSTALL) -e .
	$(COMPILE)
	touch $(RUN_STAMP)

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(INSTALL) -e '.[test]'
	$(COMPILE)
	touch $(TEST_STAMP) $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/specdec-tui fetch
	$(BIN)/specdec-tui $(ARGS)

test: $(TEST_STAMP)
	$(BIN)/specdec-tui fetch
	$(BIN)/ruff check core tui tests docs tools
	$(WRITE_BYTECODE) $(BIN)/python -m pytest -q -n $(WORKERS) --dist loadscope --no-loadscope-reorder $(PYTEST_ARGS)

clean:
	rm -rf $(VENV)
