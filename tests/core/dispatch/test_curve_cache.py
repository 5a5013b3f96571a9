"""A calibration kept per pair and machine (issue 31, core/dispatch/curve_cache.py).

The second `chat` with a cost-aware profile on the same pair starts its first round with no
calibration; a changed model, backend, device, MLX version, dispatch or sampling view misses;
a damaged, oversized, too deeply nested or foreign file is ignored with a sentence naming it.
The machine and MLX's version are faked (their values, never the maths); the calibrations
counted here run for real on the tiny random-weight pair.
"""

from __future__ import annotations

import argparse
import json
import sys

import pytest

import core.dispatch
from core.dispatch.backend import backend_info
from core.dispatch.curve import VerifyCostCurve
from core.dispatch.curve_cache import (
    curve_key,
    key_path,
    load_curve,
    save_curve,
)
from core.identity import ModelIdentity
from core.settings import Settings
from tests.helpers.forward_rows import H200

H100 = backend_info(query=lambda: ("cuda", {"device_name": "NVIDIA H100",
                                            "compute_capability_major": 9,
                                            "compute_capability_minor": 0}))
METAL = backend_info(query=lambda: ("metal", {"device_name": "Apple M2",
                                              "architecture": "applegpu_g14s"}))
COST = Settings(policy="cost-aware", temperature=0.0, rule="greedy", k_max=8)
TARGET = ModelIdentity("default", kind="default", architecture="llama", bits=4,
                       sha256="ab" * 32)
DRAFT = ModelIdentity("self:bits=4", kind="self", architecture="llama", bits=4,
                      sha256="ab" * 32, base="default")
PAIR = {"target": TARGET, "draft": DRAFT}


def _curve(rows: int = 9) -> VerifyCostCurve:
    return VerifyCostCurve("cuda", "NVIDIA H200", 128,
                           {"auto": {r: 1e-3 * (1 + 0.1 * r) for r in range(1, rows + 1)}},
                           draft_step_s=2e-4)


def _key(models=PAIR, backend=H200, mlx="0.32.4", settings=COST):  # noqa: ANN001, ANN202
    return curve_key(models, backend, mlx, settings)


def test_a_kept_curve_is_found_again_with_its_measurement_time(tmp_path):
    curve = _curve()
    path = save_curve(_key(), curve, tmp_path)
    assert path is not None and path.parent == tmp_path
    found = load_curve(_key(), COST, tmp_path)
    assert found.notice is None and found.kept is not None
    assert found.kept.curve.times == curve.times and found.kept.measured_at == curve.created
    assert found.kept.curve.draft_step_s == curve.draft_step_s


@pytest.mark.parametrize(
    "changed",
    [
        {"models": {"target": ModelIdentity("default", kind="default", architecture="llama",
                                            bits=4, sha256="cd" * 32), "draft": DRAFT}},
        {"models": {"target": TARGET, "draft": ModelIdentity("self:bits=3", kind="self",
                                                             architecture="llama", bits=3,
                                                             sha256="ab" * 32)}},
        {"models": {"target": TARGET, "draft": None}},
        {"backend": H100},
        {"backend": METAL},
        {"mlx": "0.33.0"},
        {"settings": COST.replace(dispatch="fastest")},
        {"settings": COST.replace(temperature=0.7, rule="lossless")},  # the sampled view
        {"settings": COST.replace(step="compiled")},
        {"settings": COST.replace(step="auto")},
    ],
    ids=["target-sha256", "draft", "no-draft", "device", "backend", "mlx-version", "dispatch",
         "sampling", "step-compiled", "step-auto"],
)
def test_anything_that_decides_the_curve_changed_is_a_miss(tmp_path, changed):
    save_curve(_key(), _curve(), tmp_path)
    key = _key(**changed)
    assert key != _key()
    settings = changed.get("settings", COST)
    found = load_curve(key, settings, tmp_path)
    assert found.kept is None and found.notice is None  # simply not kept: measured, no alarm


def test_shapes_are_keyed_by_shape_and_seed_and_unpinned_models_are_never_kept(tmp_path):
    a = ModelIdentity("shape:tiny", kind="shape", shape="tiny", seed=0)
    b = ModelIdentity("shape:tiny,seed=1", kind="shape", shape="tiny", seed=1)
    assert _key({"target": a, "draft": None}) != _key({"target": b, "draft": None})
    unknown = ModelIdentity("./somewhere", kind="unknown")
    assert _key({"target": unknown, "draft": None}) is None
    assert save_curve(None, _curve(), tmp_path) is None
    assert load_curve(None, COST, tmp_path).kept is None


def test_a_curve_too_short_for_the_settings_is_measured_again(tmp_path):
    save_curve(_key(), _curve(rows=9), tmp_path)
    longer = COST.replace(k_max=15)
    assert load_curve(_key(settings=longer), longer, tmp_path).kept is None


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"{\"format\": \"specdec-tui curve cache\", \"vers", "is damaged"),
        (b"\xff\xfe not text", "is damaged"),
        (json.dumps({"format": "something else", "version": 1}).encode(), "is not a curve"),
        (b"[" * 40 + b"]" * 40, "nests arrays or tables more than 32 deep"),
        (None, "was measured for another pair or machine"),  # the right name, another key
        ("bad-curve", "is malformed"),
    ],
    ids=["truncated", "binary", "foreign", "nested", "other-key", "bad-curve"],
)
def test_a_damaged_or_foreign_file_is_ignored_with_a_notice(tmp_path, content, says):
    key = _key()
    path = key_path(key, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if content is None:
        other = save_curve(_key(mlx="0.1.0"), _curve(), tmp_path)
        path.write_bytes(other.read_bytes())
    elif content == "bad-curve":
        path.write_text(json.dumps({"format": "specdec-tui curve cache", "version": 1,
                                    "key": key, "measured_at": 0, "curve": {"times": {}}}))
    else:
        path.write_bytes(content)
    found = load_curve(key, COST, tmp_path)
    assert found.kept is None and found.notice and says in found.notice, found.notice
    assert str(path) in found.notice and found.notice.endswith("measured again.")
    # measuring again writes a good one over it
    save_curve(key, _curve(), tmp_path)
    assert load_curve(key, COST, tmp_path).kept is not None


def test_an_oversized_file_is_not_read(tmp_path, monkeypatch):
    import core.dispatch.curve_cache as cc

    key = _key()
    save_curve(key, _curve(), tmp_path)
    monkeypatch.setattr(cc, "CURVE_MAX_BYTES", 64)
    found = load_curve(key, COST, tmp_path)
    assert found.kept is None and "larger than" in found.notice


@pytest.fixture
def counted_calibrations(monkeypatch):
    """Every calibration, from any caller, counted (and still run)."""
    module = sys.modules["core.dispatch.calibrate"]
    real = module.calibrate
    calls = []

    def counting(*a, **kw):
        calls.append(kw.get("rows"))
        return real(*a, **kw)

    monkeypatch.setattr(module, "calibrate", counting)
    monkeypatch.setattr(core.dispatch, "calibrate", counting)
    return calls


def _chat_args(**kw) -> argparse.Namespace:  # noqa: ANN003
    base = dict(prompt="Say hello.", target="shape:tiny", draft="shape:tiny-draft",
                profile="hybrid-cost-aware", profiles_dir=None, max_tokens=4, temperature=None,
                mode=None, draft_source=None)
    return argparse.Namespace(**{**base, **kw})


def test_a_second_chat_on_the_same_pair_reuses_the_curve_and_another_misses(tmp_path, monkeypatch,
                                                         counted_calibrations, capsys):
    from core.chat.cli import run_chat_cli

    monkeypatch.setenv("SPECDEC_TUI_CACHE", str(tmp_path))
    monkeypatch.delenv("SPECDEC_TUI_CURVES", raising=False)  # the suite's own folder: this test reads the cache
    assert run_chat_cli(_chat_args()) == 0
    assert len(counted_calibrations) == 1  # the first start measures (after its warm-up)
    kept = list((tmp_path / "curves").glob("curve-*.json"))
    assert len(kept) == 1
    capsys.readouterr()
    assert run_chat_cli(_chat_args()) == 0
    assert len(counted_calibrations) == 1  # the second starts its first round at once
    assert "calibration kept from" in capsys.readouterr().err
    # another pair misses: measured again, kept beside the first
    assert run_chat_cli(_chat_args(draft="shape:tiny")) == 0
    assert len(counted_calibrations) == 2
    assert len(list((tmp_path / "curves").glob("curve-*.json"))) == 2
    # a damaged kept curve is said, measured again and written over
    kept[0].write_text("{ not json")
    capsys.readouterr()
    assert run_chat_cli(_chat_args()) == 0
    err = capsys.readouterr().err
    assert "is damaged" in err and len(counted_calibrations) == 3
    assert json.loads(kept[0].read_text())["format"] == "specdec-tui curve cache"


def _spoil(path, where: tuple, value) -> None:  # noqa: ANN001
    """Write `value` at `where` in the kept JSON (NaN and Infinity as JSON's extensions)."""
    doc = json.loads(path.read_text())
    node = doc
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e300, -5.0, "yesterday", None])
def test_a_kept_curve_with_a_bad_date_is_set_aside_and_measured_again(tmp_path, value) -> None:
    """A NaN, inf or 1e300 `measured_at` made every `chat` exit 1 with a traceback (`when()`)
    and the file was kept, so it never recovered."""
    key = _key()
    path = save_curve(key, _curve(), tmp_path)
    _spoil(path, ("measured_at",), value)
    found = load_curve(key, COST, tmp_path)
    assert found.kept is None and found.notice and str(path) in found.notice, found.notice
    assert "measured_at" in found.notice and "set aside" in found.notice
    assert not path.exists() and path.with_name(path.name + ".damaged").exists()
    save_curve(key, _curve(), tmp_path)
    kept = load_curve(key, COST, tmp_path).kept
    assert kept is not None and kept.when()  # the rebuilt one is read and shown


@pytest.mark.parametrize(
    ("where", "value"),
    [(("curve", "draft_step_sampled_s"), float("nan")),
     (("curve", "draft_step_sampled_s"), -1e-3),
     (("curve", "accept_s"), {"auto": {"2": float("nan")}}),
     (("curve", "accept_s"), {"auto": {"2": -1.0}}),
     (("curve", "accept_s"), {"auto": {"0": 1e-4}}),
     (("curve", "accept_s"), {"auto": {"2": True}}),
     (("curve", "created"), float("inf")),
     (("curve", "draft_step_s"), float("-inf"))],
    ids=["sampled-nan", "sampled-negative", "accept-nan", "accept-negative", "accept-row-0",
         "accept-bool", "created-inf", "draft-step-inf"],
)
def test_every_number_of_a_kept_curve_is_checked(tmp_path, where, value) -> None:
    """`draft_step_sampled_s` or `accept_s` as NaN or negative was reused silently (float(),
    not _seconds()) and changed the draft decisions."""
    key = _key()
    curve = _curve()
    curve.draft_step_sampled_s = 3e-4
    curve.accept_s = {"auto": {2: 1e-5}}
    path = save_curve(key, curve, tmp_path)
    assert load_curve(key, COST, tmp_path).kept is not None  # as written, it is good
    _spoil(path, where, value)
    found = load_curve(key, COST, tmp_path)
    assert found.kept is None and found.notice and str(path) in found.notice, found.notice
    assert not path.exists()


def test_a_step_other_than_eager_needs_the_compiled_rows_and_auto_calibrates_first():
    from core.dispatch.curve_cache import calibration_modes, curve_missing, curve_wanted

    plain = _curve()
    assert "compiled" not in calibration_modes(COST) and not curve_missing(plain, COST)
    for step in ("compiled", "auto"):
        assert calibration_modes(COST.replace(step=step))[-1] == "compiled"
        assert curve_missing(plain, COST.replace(step=step))
    fixed = COST.replace(policy="fixed")
    assert curve_wanted(None, fixed.replace(step="auto"))  # auto decides by a curve
    assert not curve_wanted(None, fixed.replace(step="compiled"))  # compiled needs none to run
