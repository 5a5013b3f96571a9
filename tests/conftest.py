"""Suite-wide: user profiles go to a folder of the run's own, never the user's real one; the
real default pair is loaded once per process (tests/helpers/pairs.py)."""

from __future__ import annotations

import gc
import os
import tempfile

import pytest

from core.profile.files import PROFILES_ENV
from core.sweep.last import SWEEP_ENV
from tests.helpers import pairs


def pytest_configure() -> None:
    # Set before any test and inherited by every CLI the tests start: a test that saves without
    # --profiles-dir writes here, not into the user data folder of whoever runs the suite.
    # One folder per process: parallel workers (pytest-xdist) never save over each other.
    os.environ[PROFILES_ENV] = tempfile.mkdtemp(prefix="specdec-profiles-")
    # The sweep's copy for the app (core/sweep/last.py), likewise.
    os.environ[SWEEP_ENV] = os.path.join(tempfile.mkdtemp(prefix="specdec-sweep-"), "last.json")
    # Kept calibration curves likewise (core.dispatch.curve_cache): a test that expects a first
    # calibration never finds one an earlier run kept in the user cache.
    os.environ["SPECDEC_TUI_CURVES"] = tempfile.mkdtemp(prefix="specdec-curves-")
    # Young collections every 50,000 allocations, not 700: a worker keeps ~650,000 objects
    # alive (the default pair, the imports, and Textual's module-level cache of 1,024 widgets'
    # style caches, each holding its rendered strips), and CPython's default thresholds ran a
    # full collection of them ~50 times in test_app.py and test_engine.py, 18 s of their 142 s
    # of CPU (3 s with these). Tests that measure memory (the soak) collect before they count.
    gc.set_threshold(50_000, 20, 20)


# The modules whose tests take minutes on a 2-core CPU (real-model benches, the soak, the
# two-rank runs), started first, slowest first: with a pytest-xdist worker per core and one
# more (make test), each then runs beside the short modules instead of after them, where they
# made a tail of minutes. Ordered by their summed seconds in a full run (docs: README's tests section);
# `make test` passes --no-loadscope-reorder, without which xdist reorders modules by their
# number of tests and this order has no effect (the one-test soak module then started last).
SLOW_FIRST = (
    "tests/core/primitives/test_compiled.py",
    "tests/core/decode/test_engine.py",
    "tests/tui/test_soak.py",
    "tests/core/sweep/test_run.py",
    "tests/tui/test_app.py",
    "tests/core/drafting/test_tree.py",
    "tests/core/drafting/test_lookup.py",
    "tests/core/chat/test_kept_faults.py",
    "tests/core/runtime/test_distributed.py",
    "tests/core/bench/test_protocol.py",
    "tests/tui/test_keys.py",
    "tests/tui/test_snapshots.py",
    "tests/tui/test_app_as_used.py",
    "tests/core/models/test_loader.py",
    "tests/tui/test_real_engine.py",
    "tests/docs/test_gpu_probes.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow modules first, each kept whole and in its own order (the sort is stable)."""
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.fixture(scope="session")
def default_pair():
    """ModelPair of the embedded SmolLM2 target and its `self:bits=4` draft: the app's default pair
    (Settings().draft; ~2 s to load), once per process.

    Mark tests that use it `@pytest.mark.real_model`; `make test` fetches the model first.
    """
    return pairs.default_pair()


@pytest.fixture(scope="session")
def default_greedy(default_pair, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN001, ANN201
    """(prompt ids, 160 greedy target-only tokens) of the default pair for one prompt, generated
    once per session by whichever pytest-xdist worker asks first (tests/helpers/greedy_reference.py):
    the compiled step's, the drafting sources' and the engine's greedy exactness tests compare
    their runs to it (or to its first tokens)."""
    from tests.helpers.greedy_reference import greedy_reference

    under_xdist = os.environ.get("PYTEST_XDIST_WORKER") is not None
    return greedy_reference(default_pair,
                            tmp_path_factory.getbasetemp().parent if under_xdist else None)


@pytest.fixture(autouse=True)
def _one_default_pair(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real-model test whose CLI or app loads the default pair gets the process's one (the
    default_pair fixture's): the bench, the sweep and the app's engine load it through
    core.models.load_pair."""
    if request.node.get_closest_marker("real_model") is None:
        return
    import core.models

    monkeypatch.setattr(core.models, "load_pair", pairs.sharing(core.models.load_pair))
