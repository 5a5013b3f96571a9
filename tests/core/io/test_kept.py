"""The files the tool keeps for itself (core/io/kept.py): no output lands on one whatever the
user typed, and each is read as warily as a file a user hands over."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.io import kept
from core.profile import Profile, ProfileStore
from tests.helpers.cli_checks import QUICK, TINY, refused
from tests.helpers.kept_faults import UNREADABLE, plant_unreadable
from tests.helpers.profile import SEED, make_run

pytestmark = pytest.mark.usefixtures("wide_console")

MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A private model cache holding a stand-in for the default model (never the user's)."""
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / MODEL).write_bytes(b"GGUF stand-in: the bytes an output must never replace")
    monkeypatch.setenv(kept.CACHE_ENV, str(folder))
    return folder


# --------------------------------------------------------------------------- row 1


def test_no_output_lands_on_the_default_model_or_a_kept_file(cache, tmp_path, capsys,
                                                             no_load) -> None:
    """`--json <cache>/<default model> --force` with the target left as "default" replaced
    the 98 MB model it had just read: what the specs resolve to is the input, not the text."""
    model = cache / MODEL
    before = model.read_bytes()
    untyped = [a for a in QUICK if a not in TINY]  # the default target, as a user types it
    refused(capsys, ["bench", *untyped, "--json", str(model), "--force"],
            "inside the model cache folder")
    refused(capsys, ["bench", *untyped, "--draft", "self:bits=3", "--csv", str(model),
                     "--force"], "model cache folder")
    refused(capsys, ["sweep", "--prompt", "hi", "--tokens", "2", "--json", str(model),
                     "--force"], "model cache folder")
    refused(capsys, ["calibrate", "--json", str(model), "--force"], "model cache folder")
    profiles = tmp_path / "profiles"
    ProfileStore(profiles).save(Profile("rec", SEED, "", make_run()))
    refused(capsys, ["profiles", "export", "rec", "--csv", str(model), "--force",
                     "--profiles-dir", str(profiles)], "model cache folder")
    assert model.read_bytes() == before
    # a kept curve, the verified mark and the sweep's copy are inputs too
    curve = kept.curves_dir() / "curve-0.json"
    curve.write_text("{}")
    refused(capsys, ["bench", *QUICK, "--json", str(curve), "--force"], "kept curves folder")
    mark = cache / (MODEL + ".verified.json")
    refused(capsys, ["calibrate", "--json", str(mark), "--force", *TINY], "model cache folder")
    last = kept.last_sweep_path()
    last.parent.mkdir(parents=True, exist_ok=True)
    last.write_text("{}")
    refused(capsys, ["bench", *QUICK, "--json", str(last), "--force"], "last sweep's copy")
    assert curve.read_text() == "{}" and last.read_text() == "{}"


def test_an_output_inside_a_model_folder_a_command_reads_is_refused(tmp_path) -> None:
    from core.io.atomic import OutputPathError, check_outputs

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with pytest.raises(OutputPathError, match="inside the target model"):
        check_outputs([("--json", str(folder / "config.json"))], force=True,
                      inputs=[("target model", str(folder))])
    # beside the folder is fine
    assert check_outputs([("--json", str(tmp_path / "r.json"))],
                         inputs=[("target model", str(folder))])
    assert os.listdir(folder) == ["config.json"]


# --------------------------------------------------------------------------- rows 2-4: reading


def _hostile(path: Path, kind: str) -> None:
    if kind in UNREADABLE:
        plant_unreadable(path, kind)
    elif kind == "dangling":
        path.symlink_to(path.parent / "nowhere")
    elif kind == "nan":
        path.write_text('{"n": NaN}')
    else:
        path.write_text('{"n": "7"}')


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse", "dangling", "nan", "wrong-type"])
def test_read_kept_sets_a_hostile_file_aside_with_one_sentence(tmp_path, kind, caplog) -> None:
    path = tmp_path / "k.json"
    _hostile(path, kind)
    with caplog.at_level("WARNING", logger="core"):
        assert kept.read_kept(path, "kept thing", lambda d: kept.count(d["n"], "n")) is None
        assert kept.read_kept(path, "kept thing", lambda d: d) is None  # gone: nothing to say
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and str(path) in said[0] and "set aside" in said[0], said
    assert not os.path.lexists(path) and os.path.lexists(path.with_name("k.json.damaged"))
    assert os.path.realpath("/dev/zero") == "/dev/zero"  # a link is moved, never its target


def test_number_refuses_what_json_lets_through() -> None:
    for bad in (float("nan"), float("inf"), -1.0, True, "1", None, 1e300):
        with pytest.raises(kept.KeptFileError):
            kept.number(bad, "x", high=1e12)
    assert kept.number(3, "x") == 3.0 and kept.count(0, "n") == 0
    with pytest.raises(kept.KeptFileError):
        kept.count(1.0, "n")


# --------------------------------------------------------------------------- row 8: modes


@pytest.mark.parametrize("kind", ["dev-zero-link", "fifo", "regular-0600", "new"])
def test_a_staged_write_takes_only_a_regular_files_mode(tmp_path, kind) -> None:
    """A kept curve that was a link to /dev/zero was rewritten world-writable (0666): the
    staged file copied the device's mode."""
    from core.io.atomic import write_atomic

    dest = tmp_path / "curve.json"
    want = 0o644
    if kind == "dev-zero-link":
        dest.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(dest, 0o666)
        os.chmod(dest, 0o666)
    elif kind == "regular-0600":
        dest.write_text("old")
        os.chmod(dest, 0o600)
        want = 0o600
    write_atomic(dest, "{}")
    assert dest.is_file() and not dest.is_symlink() and dest.read_text() == "{}"
    assert dest.stat().st_mode & 0o777 == want, oct(dest.stat().st_mode)


# --------------------------------------------------------------------------- note: temps


def test_an_interrupted_write_leaves_no_hidden_temp_behind(tmp_path) -> None:
    """A writer killed mid-write left `.NAME.*.tmp` beside the output for good; the next
    write into that folder removes every temp of ours whose writer is gone."""
    import subprocess
    import sys
    import time

    from core.io.atomic import write_atomic
    from tests.helpers import REPO

    dest = tmp_path / "report.json"
    code = ("import os, signal\nfrom pathlib import Path\nfrom core.io.atomic import staged_file\n"
            f"with staged_file(Path({str(tmp_path)!r}), 'report.json') as (f, tmp):\n"
            "    f.write(b'half a report')\n    f.flush()\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**os.environ,
                          "PYTHONPATH": str(REPO)}, check=False)
    assert proc.returncode == -9
    left = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(left) == 1, list(tmp_path.iterdir())
    old = time.time() - 3600
    os.utime(left[0], (old, old))
    alive = tmp_path / f".other.json.sd{os.getpid()}.abcdefgh.tmp"  # a live writer's: kept
    alive.write_text("in progress")
    os.utime(alive, (old, old))
    write_atomic(dest, "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, "report.json"])
