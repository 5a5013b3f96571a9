"""`specdec-tui calibrate` (core/dispatch/cli.py): its rows and context bounded, the profile's
models loaded, checks made before anything is built (issues 21, 24 and 32)."""

from __future__ import annotations

import time

import pytest

from core import cli
from core import models as M
from tests.helpers.cli_checks import TINY, refused


@pytest.mark.usefixtures("wide_console")
def test_calibrate_past_the_context_window_is_refused_before_it_runs(capsys, monkeypatch) -> None:
    import core.dispatch.cli as dcli

    monkeypatch.setattr(dcli, "calibrate", lambda *a, **k: pytest.fail("calibration ran"))
    msg = refused(capsys, ["calibrate", "--context", "100000", *TINY], "--context 100,000",
                  "context window of 4,096 tokens")  # fmt: skip
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
        "fused_draft = true\n"
    )
    seen = []

    def load_pair(target, draft, **kw):
        seen.append((target, draft))
        raise M.ModelLoadError("stop here.")

    monkeypatch.setattr(core.models, "load_pair", load_pair)
    assert cli.main(["--profile", str(tmp_path / "tiny.toml"), "calibrate"]) == 2
    assert cli.main(["calibrate", "--profile", str(tmp_path / "tiny.toml"),
                     "--target", "shape:other"]) == 2  # fmt: skip
    assert seen == [("shape:tiny", "shape:tiny-draft"), ("shape:other", "shape:tiny-draft")]
