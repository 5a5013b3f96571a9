"""Shared fixtures for core tests: the tiny random pair the bench tests run on, once per module
(a module's engines share its weights); the real default pair is tests/conftest.py's."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def target():
    """The seeded 2-layer tiny llama (tests/helpers/tiny.py) the engine, drafting, lookup and
    no-loss tests run against, once per module (each module's engines share its weights)."""
    from tests.helpers.tiny import tiny_llama

    return tiny_llama(2, seed=0)


@pytest.fixture(scope="module")
def tiny_pair():
    """ModelPair of `shape:tiny` / `shape:tiny-draft`: random ~100k-parameter llamas (CPU, ms)."""
    from core.models import load_pair

    return load_pair("shape:tiny", "shape:tiny-draft")


@pytest.fixture
def engine(tiny_pair):
    """A fresh Engine on the module's tiny pair (empty caches each test)."""
    from core.decode.engine import Engine

    return Engine.from_pair(tiny_pair)


@pytest.fixture
def wide_console(monkeypatch) -> None:
    """A console wide enough that a refusal is one line (the hostile-input modules use it)."""
    monkeypatch.setenv("COLUMNS", "400")


@pytest.fixture
def no_load(monkeypatch) -> list[tuple]:
    """Loading a pair fails the test: what is checked here is checked before the models load."""
    import core.models

    calls: list[tuple] = []

    def load_pair(*args, **kw):  # noqa: ANN002, ANN003
        calls.append(args)
        raise AssertionError("the models loaded before the check")

    monkeypatch.setattr(core.models, "load_pair", load_pair)
    return calls


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> object:  # noqa: ANN001
    """shape:tiny saved as an mlx-lm folder (2 layers, 4-bit), once per module: tests edit copies
    of it (tests.helpers.models.edited_copy)."""
    from core import models as M

    return M.save_mlx_folder(M.load_model("shape:tiny"), tmp_path_factory.mktemp("m") / "tiny")


class Blocked(BaseException):
    """A read still blocked when the alarm rang (not an OSError, which a reader would swallow)."""


@pytest.fixture
def no_hang():
    """A read that blocks (a FIFO opened) fails the test after 5 s instead of hanging it: the
    hostile kept-file and untrusted-input tests."""
    import signal

    def fail(signum, frame):  # noqa: ANN001
        raise Blocked("blocked for 5 s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.setitimer(signal.ITIMER_REAL, 5.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
