"""`specdec-tui calibrate` (core/calibrate/cli.py): its rows and context bounded, the profile's
models loaded, checks made before anything is built (issues 21, 24 and 32)."""

from __future__ import annotations

import json
import time
import types

import pytest

from core import cli
from core import models as M
from core.dispatch import VerifyCostCurve
from tests.helpers.cli_checks import TINY, refused
from tests.helpers.tiny import dispatch_llama as tiny_llama


@pytest.mark.usefixtures("wide_console")
def test_calibrate_past_the_context_window_is_refused_before_it_runs(capsys, monkeypatch) -> None:
    import core.calibrate.cli as dcli

    monkeypatch.setattr(dcli, "calibrate", lambda *a, **k: pytest.fail("calibration ran"))
    msg = refused(capsys, ["calibrate", "--context", "100000", *TINY], "--context 100,000",
                  "context window of 4,096 tokens")
    assert "--context 4,0" not in msg  # the hint is a number a user can type
    refused(capsys, ["calibrate", "--context", "4090", *TINY], "use --context")


@pytest.mark.usefixtures("wide_console")
def test_calibrate_rows_are_bounded_before_anything_is_built(capsys, no_load) -> None:  # noqa: F811
    t0 = time.monotonic()
    refused(capsys, ["calibrate", "--rows", "1000000000", *TINY], "--rows must be between 1 and")
    assert time.monotonic() - t0 < 5
    refused(capsys, ["calibrate", "--repeats", "10000000", *TINY], "--repeats must be at most")
    from core.dispatch.calibrate import calibration_tokens
    from core.dispatch.curve import CalibrationError

    with pytest.raises(CalibrationError):
        calibration_tokens(10**9, 5, 128)
    assert no_load == []


@pytest.mark.usefixtures("wide_console")
def test_calibrate_loads_the_profiles_models(tmp_path, monkeypatch) -> None:
    import core.models

    (tmp_path / "tiny.toml").write_text(
        'schema = 2\n[settings]\ntarget = "shape:tiny"\ndraft = "shape:tiny-draft"\n'
        "step = \"compiled\"\n"
    )
    seen = []

    def load_pair(target, draft, **kw):
        seen.append((target, draft))
        raise M.ModelLoadError("stop here.")

    monkeypatch.setattr(core.models, "load_pair", load_pair)
    assert cli.main(["--profile", str(tmp_path / "tiny.toml"), "calibrate"]) == 2
    assert cli.main(["calibrate", "--profile", str(tmp_path / "tiny.toml"),
                     "--target", "shape:other"]) == 2
    assert seen == [("shape:tiny", "shape:tiny-draft"), ("shape:other", "shape:tiny-draft")]


def _fake_pair(monkeypatch: pytest.MonkeyPatch) -> list:
    asked: list = []
    target = tiny_llama()

    def load_pair(target_spec, draft_spec):
        asked.append((target_spec, draft_spec))
        loaded = types.SimpleNamespace(model=target, spec=target_spec, name="tiny", config={})
        return types.SimpleNamespace(target=loaded, draft=None, vocab_size=96)  # as a ModelPair

    import core.models

    monkeypatch.setattr(core.models, "load_pair", load_pair)
    monkeypatch.setenv("COLUMNS", "200")
    return asked


def test_calibrate_cli_prints_the_table_and_writes_json(monkeypatch, tmp_path, capsys):
    asked = _fake_pair(monkeypatch)
    from core.cli import main

    out = tmp_path / "curves" / "cpu.json"
    out.parent.mkdir()  # a missing folder is refused, as bench refuses one (issue 24)
    code = main(["calibrate", "--rows", "3", "--repeats", "1", "--context", "8",
                 "--modes", "auto,plain", "--json", str(out)])
    assert code == 0
    assert asked == [("default", None)]
    text = capsys.readouterr().out
    curve = VerifyCostCurve.from_dict(json.loads(out.read_text()))
    assert set(curve.times) == {"auto", "plain"} and sorted(curve.times["auto"]) == [1, 2, 3]
    assert "cpu_qmm_t" in text and "predicted none" in text
    # one repeat of a tiny model is noise: the printed verdict must match the stored curve
    measured = curve.boundary()
    assert f"measured {'none' if measured is None else f'R = {measured}'}" in text
    assert ("agrees" if curve.prediction_agrees else "DISAGREES") in text
    assert [p.name for p in out.parent.iterdir()] == ["cpu.json"]  # no temp file left behind
    warm = json.loads(out.read_text())["warmup"]  # the compile warm-up: none on the CPU
    assert warm["ran"] is False and "CPU" in warm["reason"] and warm["settled"] is None


def test_calibrate_cli_user_errors_end_in_one_sentence(monkeypatch, tmp_path, capsys):
    _fake_pair(monkeypatch)
    from core.cli import main

    assert main(["calibrate", "--modes", "auto,turbo"]) == 2
    assert "--modes takes" in capsys.readouterr().err
    assert main(["calibrate", "--rows", "0"]) == 2
    assert "--rows must be at least 1" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = main(["calibrate", "--rows", "1", "--repeats", "1", "--context", "4",
                 "--json", str(blocker / "sub" / "c.json")])
    assert code == 2  # refused before the models load, not after the run
    assert f"the folder {blocker / 'sub'} does not exist" in capsys.readouterr().err


def test_calibrate_arguments_defaults():
    import argparse

    from core.calibrate.cli import add_calibrate_arguments

    p = argparse.ArgumentParser()
    add_calibrate_arguments(p)
    a = p.parse_args([])
    assert (a.rows, a.repeats, a.context, a.modes, a.json) == (16, 5, 128, "auto", None)
