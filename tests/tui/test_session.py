"""MLXSession on the tiny random-weight pair (issue 31): a turn warms only its first rounds'
sizes, the rest is warmed one size per idle step, and a session started again on the same
pair reuses the kept curve. The GPU is faked (the hardware query), the forwards are real."""

from __future__ import annotations

import threading

import pytest

import core.dispatch.backend as backend_mod
from core.dispatch.backend import backend_info
from core.settings import MAX_K, Settings

CUDA = backend_info(query=lambda: ("cuda", {"device_name": "NVIDIA H200",
                                            "compute_capability_major": 9,
                                            "compute_capability_minor": 0}))
GREEDY = Settings(temperature=0.0, rule="greedy", k=2, max_tokens=3)


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setattr(backend_mod, "current_backend", lambda: CUDA)


def _session():  # noqa: ANN202
    from tui.session import MLXSession

    return MLXSession("shape:tiny", "shape:tiny-draft")


def test_a_turn_warms_its_first_rounds_and_idle_steps_warm_the_rest(gpu):
    s = _session()
    assert s.warmup is None and s.warmer.idle_pending  # nothing compiled at load
    total = s.warmer.idle_total
    ids = s.prompt_ids([{"role": "user", "content": "hello"}])
    items = list(s.generate(ids, GREEDY, threading.Event(), lambda: GREEDY))
    assert items and s.warmup.ran and s.warmup.rows == [1, 2, 3]  # k + 1, not MAX_K + 1
    steps = []
    while (p := s.warm_idle(GREEDY)) is not None:
        steps.append(p)
        assert len(steps) <= total + 4
    assert steps and steps[-1].finished
    verified = {z.rows for z in s.warmer.ran if z.kind == "verify"}
    assert verified == set(range(1, MAX_K + 2))  # every size, in the end
    trees = {z.rows for z in s.warmer.ran if z.kind == "tree"}
    assert trees == set(range(2, 65))  # and the tree source's (`d` reaches it)


def test_a_session_started_again_reuses_the_kept_curve(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_TUI_CACHE", str(tmp_path))
    monkeypatch.delenv("SPECDEC_TUI_CURVES", raising=False)  # the suite's own folder: this test reads the cache
    cost = Settings(policy="cost-aware", temperature=0.0, rule="greedy", k_max=4)
    first = _session()
    assert first.kept_curve(cost) == (None, ())  # nothing kept yet
    measured = first.calibrate(cost, lambda f, label: None)
    assert measured.kept_at is None
    again = _session()
    assert again.engine.needs_curve(cost)
    info, notices = again.kept_curve(cost)
    assert notices == () and info is not None and info.kept_at
    assert info.t_verify == measured.t_verify
    assert not again.engine.needs_curve(cost)  # its first round starts without calibrating
    # a greedy curve is not the sampled view's: a sampled run measures its own
    assert again.kept_curve(cost.replace(temperature=0.7, rule="lossless")) == (None, ())


def test_a_hostile_kept_curve_is_a_notice_and_the_next_calibration_rebuilds_it(tmp_path,
                                                                                monkeypatch) -> None:
    """The app's side of the kept-file faults: a kept curve that is a FIFO, a /dev/zero link,
    200 MB of nothing, NaN, inf or strings in every number, or cut in half is, for a session
    started on that pair, one notice naming the file (never a hang, never "error: ValueError"
    on every turn); the calibration that follows writes a good one, which the next start reads."""
    import time

    from tests.helpers.kept_faults import FAULTS, spoil

    monkeypatch.setenv("SPECDEC_TUI_CURVES", str(tmp_path))
    cost = Settings(policy="cost-aware", temperature=0.0, rule="greedy", k_max=4)
    _session().calibrate(cost, lambda f, label: None)
    (kept,) = tmp_path.iterdir()
    good = kept.read_text()
    for fault in FAULTS:
        spoil(kept, fault, good)
        s = _session()
        start = time.perf_counter()
        info, notices = s.kept_curve(cost)
        assert time.perf_counter() - start < 5.0, fault
        assert info is None and len(notices) == 1, (fault, notices)
        assert str(kept) in notices[0] and "set aside" in notices[0], (fault, notices)
        s.calibrate(cost, lambda f, label: None)
        info, notices = _session().kept_curve(cost)
        assert info is not None and info.kept_at and notices == (), fault


def test_a_second_turn_prefills_only_what_the_cache_does_not_hold():
    s = _session()
    first = [{"role": "user", "content": "hello there"}]
    ids = s.prompt_ids(first)
    assert s.cached_tokens(ids, GREEDY) == 0
    items = list(s.generate(ids, GREEDY, threading.Event(), lambda: GREEDY))
    answer = s.decode(items[-1].token_ids)
    second = s.prompt_ids([*first, {"role": "assistant", "content": answer},
                           {"role": "user", "content": "and again"}])
    held = s.cached_tokens(second, GREEDY)
    assert 0 < held < len(second) - 1
    assert second[:held] == ids[:held]


def test_the_idle_warm_up_says_what_it_warms_before_it_runs(gpu):
    """The status said "ready" for the 90 s the idle warm-up used a core: warm_idle_next tells
    the bridge which size comes, before it runs."""
    s = _session()
    coming = s.warm_idle_next(GREEDY)
    # the sizes the next turn uses first may not be in the plan yet: they count in the total
    assert coming.running and coming.done == 0 and coming.total >= s.warmer.idle_total
    assert coming.text() == f"warming kernels while idle: 1/{coming.total} · stops when you type"
    done = s.warm_idle(GREEDY)
    assert not done.running and done.done == 1 and (done.last, done.total) == (coming.last,
                                                                                coming.total)
    assert s.warm_idle_next(GREEDY).text().startswith("warming kernels while idle: 2/")
