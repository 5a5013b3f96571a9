"""Issue 24, the second reliability pass: each way a hostile but realistic user could still
crash, hang or lose a run ends in exit 0 or 2 with one sentence naming the file or setting,
nothing lost, and checks made before the models load."""

from __future__ import annotations

import pytest

from tests.helpers.cli_checks import QUICK, TINY, last_error, refused  # noqa: F401
from tests.helpers.models import one_sentence

pytestmark = pytest.mark.usefixtures("wide_console")





# --------------------------------------------------------------------------- seeds


def test_a_seed_mlx_cannot_take_is_refused_where_it_enters(tmp_path, capsys, no_load) -> None:
    import mlx.core as mx

    from core.settings import MAX_SEED, Settings, SettingsError

    mx.random.key(MAX_SEED)  # the bound is what mlx takes
    with pytest.raises(TypeError):
        mx.random.key(MAX_SEED + 1)
    for bad in (-1, MAX_SEED + 1):
        with pytest.raises(SettingsError) as exc:
            Settings(seed=bad)
        assert "seed must be between 0 and 2**64 - 1" in one_sentence(exc.value)
        refused(capsys, ["bench", "--seed", str(bad), *QUICK], "--seed:", "seed must be between")
    refused(capsys, ["bench", "--profile", "target-only:seed=-1", *QUICK],
            "--profile target-only:seed=-1:", "seed must be between")  # fmt: skip
    # the last of --seeds seeds must fit too
    refused(capsys, ["bench", "--seed", str(MAX_SEED - 1), *QUICK[:-4], *TINY, "--seeds", "3"],
            "goes past the largest seed")  # fmt: skip
    (tmp_path / "neg.toml").write_text("schema = 2\n[settings]\nseed = -5\n")
    refused(capsys, ["--profile", str(tmp_path / "neg.toml"), "chat", "hi", *TINY],
            "neg.toml", "seed must be between")  # fmt: skip
    assert no_load == []


def test_a_key_given_twice_in_a_profile_spec_is_refused(capsys, no_load) -> None:
    refused(capsys, ["bench", "--profile", "fixed-8-tv1:k=2,k=3", *QUICK], "sets k twice")


# --------------------------------------------------------------------------- calibration


def test_calibrate_past_the_context_window_is_refused_before_it_runs(capsys, monkeypatch) -> None:
    import core.dispatch.cli as dcli

    monkeypatch.setattr(dcli, "calibrate", lambda *a, **k: pytest.fail("calibration ran"))
    msg = refused(capsys, ["calibrate", "--context", "100000", *TINY], "--context 100,000",
                  "context window of 4,096 tokens")  # fmt: skip
    assert "--context 4,0" not in msg  # the hint is a number a user can type
    refused(capsys, ["calibrate", "--context", "4090", *TINY], "use --context")


def test_a_calibration_stops_when_cancelled() -> None:
    import threading

    from core.dispatch import CalibrationCancelled, calibrate
    from tests.helpers.tiny import tiny_llama

    cancel, seen = threading.Event(), []

    def progress(done: int, total: int, label: str) -> None:
        seen.append(done)
        if done == 3:
            cancel.set()  # Esc, while the third forward's numbers come in

    with pytest.raises(CalibrationCancelled) as exc:
        calibrate(tiny_llama(1, seed=1), tiny_llama(1, seed=2), rows=4, repeats=3, context=8,
                  progress=progress, cancel=cancel)  # fmt: skip
    assert seen == [1, 2, 3]  # not one forward more
    assert "cancelled" in one_sentence(exc.value)


# --------------------------------------------------------------------------- ranks


def test_a_lost_peer_sentence_does_not_promise_a_message_a_killed_rank_never_left(
    monkeypatch,
) -> None:
    import core.runtime.distributed as D

    class Group:
        def rank(self) -> int:
            return 1

        def size(self) -> int:
            return 2

    monkeypatch.setattr(D, "_group", Group())
    said = D.lost_peer_sentence(RuntimeError("[ring] Recv failed with errno=104"))
    assert said is not None and "rank 1 of 2 lost its peers" in said
    assert "unless it was killed" in said and "its own message says why" not in said
