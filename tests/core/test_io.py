"""Files in and out (core/io/): every read a regular file of bounded size, every output checked
by one rule before any work, recorded runs checked field by field, file text shown without
terminal escapes. Issue 32's file rows (1-4, 11-13, 15) and papercuts, each refused in one
sentence, before the models load, with nothing overwritten; no FIFO test may block (each
runs under a 5 s alarm)."""

from __future__ import annotations

import json
import math
import os
import signal
import stat
from pathlib import Path

import pytest

from core import cli
from core import models as M
from core.io import atomic, untrusted, user_text
from core.profile import Profile, ProfileStore
from tests.core.test_models import one_sentence
from tests.core.test_profile import SEED, make_run

TINY = ["--target", "shape:tiny", "--draft", "shape:tiny-draft"]
QUICK = ["--prompt", "hi", "--tokens", "4", "--seeds", "1", "--invocations", "1", "--warmup",
         "0", "--no-quality", "--no-predict", *TINY]  # fmt: skip


@pytest.fixture(autouse=True)
def wide_console(monkeypatch) -> None:
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


@pytest.fixture
def no_hang():
    """A test that would block on a FIFO fails after 5 s instead (the alarm interrupts open)."""

    def fail(signum, frame):  # noqa: ANN001
        raise TimeoutError("blocked for 5 s: a FIFO was opened")

    old = signal.signal(signal.SIGALRM, fail)
    signal.setitimer(signal.ITIMER_REAL, 5.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def profiles(tmp_path) -> Path:
    """A profiles folder holding `rec`, a profile with a recorded run."""
    folder = tmp_path / "profiles"
    ProfileStore(folder).save(Profile("rec", SEED, "", make_run()))
    return folder


def last_error(capsys) -> str:  # noqa: ANN001
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert lines, "no error on stderr"
    return " ".join(lines[-1].split())


def refused(capsys, argv: list[str], *words: str) -> str:  # noqa: ANN001
    """argv exits 2 with one line on stderr holding every one of `words`."""
    assert cli.main(argv) == 2, argv
    msg = last_error(capsys)
    for w in words:
        assert w in msg, (w, msg)
    return msg


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


# --------------------------------------------------------------------------- row 1: FIFOs


def test_a_fifo_is_refused_by_every_reader_without_blocking(tmp_path, capsys, no_load,
                                                            no_hang) -> None:  # fmt: skip
    f = fifo(tmp_path / "f")
    msg = refused(capsys, ["bench", "--prompt-file", str(f), *QUICK[2:]], "prompt file",
                  "FIFO", "not a regular file")  # fmt: skip
    assert msg.endswith(".")
    refused(capsys, ["bench", *QUICK, "--curve", str(f)], "curve file", "FIFO")
    toml = fifo(tmp_path / "p.toml")
    refused(capsys, ["profiles", "show", str(toml)], "p.toml", "FIFO")
    gguf = fifo(tmp_path / "m.gguf")
    with pytest.raises(M.ModelLoadError) as exc:
        M.load_model(str(gguf))
    assert "FIFO" in one_sentence(exc.value)
    with pytest.raises(untrusted.UntrustedFileError, match="FIFO"):
        untrusted.read_bounded(f, 10)


def test_a_fifo_in_a_model_folder_is_refused_before_mlx_reads_it(tmp_path, no_hang) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    fifo(folder / "model.safetensors")
    with pytest.raises(M.ModelLoadError) as exc:
        M.load_model(str(folder))
    msg = one_sentence(exc.value)
    assert "model.safetensors" in msg and "FIFO" in msg, msg
    # a config.json that is a FIFO is said as one, not as "has no config.json" (papercut)
    (folder / "model.safetensors").unlink()
    (folder / "config.json").unlink()
    fifo(folder / "config.json")
    with pytest.raises(M.ModelLoadError) as exc:
        M.load_model(str(folder))
    msg = one_sentence(exc.value)
    assert "config.json" in msg and "FIFO" in msg and "has no config.json" not in msg, msg


def test_a_fifo_profile_in_the_folder_is_listed_as_unreadable(profiles, capsys, no_hang) -> None:
    fifo(profiles / "pipe.toml")
    assert cli.main(["profiles", "list", "--profiles-dir", str(profiles)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "rec" in out and "pipe" in out and "FIFO" in out


# --------------------------------------------------------------------------- row 2: bounds


def test_a_device_or_an_endless_prompt_file_is_refused_before_it_is_read(
    tmp_path, capsys, no_load
) -> None:
    # In a child with its memory capped: before the fix this read 340 MB/s until killed.
    import resource
    import subprocess
    import sys

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))

    done = subprocess.run(
        [sys.executable, "-c", "import sys; from core import cli; "
         f"sys.exit(cli.main({['bench', '--prompt-file', '/dev/zero', *QUICK[2:]]!r}))"],
        capture_output=True, text=True, timeout=60, preexec_fn=cap,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "/dev/zero is a character device" in done.stderr and "Traceback" not in done.stderr
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:  # sparse: no disk, but a size past the bound
        f.truncate(untrusted.PROMPT_MAX_BYTES + 1)
    refused(capsys, ["bench", "--prompt-file", str(big), *QUICK[2:]], "big.txt",
            "larger than 4 MiB")  # fmt: skip


def test_read_bounded_never_reads_past_its_bound(tmp_path) -> None:
    p = tmp_path / "x"
    p.write_bytes(b"a" * 100)
    assert untrusted.read_bounded(p, 100) == b"a" * 100
    with pytest.raises(untrusted.UntrustedFileError, match="larger than"):
        untrusted.read_bounded(p, 99)
    with pytest.raises(untrusted.UntrustedFileError, match="a folder"):
        untrusted.read_bounded(tmp_path, 99)
    with pytest.raises(FileNotFoundError):
        untrusted.read_bounded(tmp_path / "none", 99)


# --------------------------------------------------------------------------- row 3: outputs


def test_an_output_onto_a_device_or_fifo_is_refused_even_forced(tmp_path, capsys, no_load,
                                                                no_hang) -> None:  # fmt: skip
    for dev in ("/dev/null", "/dev/full"):
        refused(capsys, ["bench", *QUICK, "--json", dev, "--force"], f"--json {dev}",
                "character device")  # fmt: skip
        assert stat.S_ISCHR(os.stat(dev).st_mode)  # never replaced by a regular file
    f = fifo(tmp_path / "out")
    refused(capsys, ["bench", *QUICK, "--csv", str(f), "--force"], "FIFO")
    refused(capsys, ["calibrate", "--json", "/dev/null", "--force", *TINY], "character device")
    assert stat.S_ISFIFO(os.stat(f).st_mode)


def test_a_symlinked_output_is_written_through_and_a_dangling_one_refused(profiles, tmp_path,
                                                                          capsys) -> None:  # fmt: skip
    d = ["--profiles-dir", str(profiles)]
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    assert cli.main(["profiles", "export", "rec", "--csv", str(link), "--force", *d]) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)  # the link stays a link
    assert real.read_text().startswith("index,tokens")  # and what it points at is updated
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "nowhere" / "x.csv")
    refused(capsys, ["profiles", "export", "rec", "--csv", str(dangling), *d],
            "symbolic link", "does not exist")  # fmt: skip
    assert dangling.is_symlink() and not (tmp_path / "nowhere").exists()


def test_check_outputs_is_one_rule(tmp_path) -> None:
    existing = tmp_path / "a.json"
    existing.write_text("{}")
    with pytest.raises(atomic.OutputPathError, match="already exists; pass --force"):
        atomic.check_outputs([("--json", existing)])
    got = atomic.check_outputs([("--json", existing)], force=True)["--json"]
    assert got.path == existing.resolve() and not got.to_stdout
    with pytest.raises(atomic.OutputPathError, match="cannot go to stdout"):
        atomic.check_outputs([("--trace", "-")], stdout=["--json"])
    with pytest.raises(atomic.OutputPathError, match="both go to stdout"):
        atomic.check_outputs([("--json", "-"), ("--csv", "-")], stdout=["--json", "--csv"])
    with pytest.raises(atomic.OutputPathError, match="both name"):
        atomic.check_outputs([("--json", tmp_path / "x"), ("--csv", tmp_path / "." / "x")])
    with pytest.raises(atomic.OutputPathError, match="is the prompt file this command reads"):
        atomic.check_outputs([("--json", existing)], force=True, inputs=[("prompt file", existing)])
    with pytest.raises(atomic.OutputPathError, match="a folder, not a file"):
        atomic.check_outputs([("--json", tmp_path)], force=True)
    with pytest.raises(atomic.OutputPathError, match="a folder on its path is a file"):
        atomic.check_outputs([("--json", existing / "x")])


# --------------------------------------------------------------------------- row 4: inputs


def test_an_output_never_overwrites_an_input_of_the_same_command(tmp_path, profiles, capsys,
                                                                 no_load) -> None:  # fmt: skip
    prompt = tmp_path / "p.txt"
    prompt.write_text("a prompt to keep")
    for flag in ("--markdown", "--json", "--csv", "--trace"):
        refused(capsys, ["bench", "--prompt-file", str(prompt), *QUICK[2:], flag, str(prompt),
                         "--force"], "is the prompt file this command reads")  # fmt: skip
    assert prompt.read_text() == "a prompt to keep"
    toml = profiles / "rec.toml"
    before = toml.read_bytes()
    d = ["--profiles-dir", str(profiles)]
    refused(capsys, ["profiles", "export", "rec", "--csv", str(toml), "--force", *d],
            "is the profile this command reads")  # fmt: skip
    refused(capsys, ["bench", *QUICK, "--profile", "rec", "--json", str(profiles / "rec.run.json"),
                     "--force", *d], "is the profile")  # fmt: skip
    assert toml.read_bytes() == before


# --------------------------------------------------------------------------- papercuts: outputs


def test_bench_and_calibrate_need_force_to_replace_a_file_like_export(tmp_path, capsys,
                                                                      no_load) -> None:  # fmt: skip
    old = tmp_path / "old.json"
    old.write_text("keep")
    refused(capsys, ["bench", *QUICK, "--json", str(old)], "already exists", "--force")
    refused(capsys, ["calibrate", "--json", str(old), *TINY], "already exists", "--force")
    assert old.read_text() == "keep"


def test_calibrate_into_a_folder_that_takes_no_file_is_refused_before_it_runs(capsys,
                                                                              no_load) -> None:  # fmt: skip
    # /proc exists and takes no new file even from root (mode bits do not stop root)
    refused(capsys, ["calibrate", "--json", "/proc/curve.json", *TINY], "/proc",
            "cannot be written")  # fmt: skip


def test_a_dash_is_stdout_and_never_a_file_named_dash(profiles, tmp_path, capsys,
                                                      monkeypatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    d = ["--profiles-dir", str(profiles)]
    assert cli.main(["profiles", "export", "rec", "--csv", "-", *d]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("index,tokens,") and len(out.out.splitlines()) == 3
    assert "wrote 2 rounds" in out.err  # what was written goes to stderr: stdout is the CSV
    assert not (tmp_path / "-").exists()


def test_bench_writes_a_dash_output_on_stdout_with_the_table_on_stderr(tmp_path, capsys,
                                                                       monkeypatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bench", *QUICK, "--csv", "-"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("setting,") or out.out.split("\n", 1)[0].count(",") > 3, out.out
    rows = list(__import__("csv").reader(out.out.splitlines()))
    assert len(rows) >= 3 and all(len(r) == len(rows[0]) for r in rows)  # the CSV alone
    assert not (tmp_path / "-").exists()


# --------------------------------------------------------------------------- rows 11-12: runs


def _bad_runs() -> dict[str, object]:
    """The edits that crashed export, show and the app: (field path, bad value)."""
    return {
        "nan timing": (("rounds", 0, "timings", "verify"), math.nan),
        "inf timing": (("rounds", 0, "timings", "total"), math.inf),
        "huge negative timing": (("rounds", 1, "timings", "total"), -1e308),
        "null timing": (("rounds", 0, "timings", "draft"), None),
        "string timing": (("rounds", 0, "timings", "draft"), "0.1"),
        "string phase_s": (("summary", "phase_s"), "fast"),
        "string tokens": (("summary", "tokens"), "9"),
        "nan e2e": (("summary", "e2e_s"), math.nan),
        "string parameters": (("summary", "models"), {"target": {"spec": "x", "parameters": "1"}}),
    }


def spoil(run_path: Path, where: tuple, value: object) -> None:
    doc = json.loads(run_path.read_text())
    node = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    run_path.write_text(json.dumps(doc))  # NaN and Infinity as Python's json writes them


@pytest.mark.parametrize("case", list(_bad_runs()))
def test_a_run_with_a_bad_number_is_refused_by_show_export_and_diff(profiles, tmp_path, capsys,
                                                                    case) -> None:  # fmt: skip
    where, value = _bad_runs()[case]
    spoil(profiles / "rec.run.json", where, value)
    d = ["--profiles-dir", str(profiles)]
    csv, trace = tmp_path / "r.csv", tmp_path / "r.json"
    msg = refused(capsys, ["profiles", "export", "rec", "--csv", str(csv), "--trace", str(trace),
                           *d], "rec.run.json", "is corrupt")  # fmt: skip
    assert msg.endswith(".") and not csv.exists() and not trace.exists()  # all or nothing
    refused(capsys, ["profiles", "show", "rec", *d], "rec.run.json", "is corrupt")
    refused(capsys, ["profiles", "diff", "rec", "target-only", *d], "rec.run.json")


def test_a_run_as_written_passes_the_check_and_export_writes_both(profiles, tmp_path) -> None:
    d = ["--profiles-dir", str(profiles)]
    csv, trace = tmp_path / "r.csv", tmp_path / "r.json"
    assert cli.main(["profiles", "export", "rec", "--csv", str(csv), "--trace", str(trace), *d]) == 0
    assert csv.read_text().startswith("index,") and json.loads(trace.read_text())["traceEvents"]


def test_export_writes_neither_file_when_one_cannot_be_staged(profiles, tmp_path, capsys,
                                                              monkeypatch) -> None:  # fmt: skip
    real = atomic.stage

    def full_for_trace(directory, stem, data, like=None):  # noqa: ANN001
        if stem.endswith(".json"):
            raise OSError(28, "No space left on device")
        return real(directory, stem, data, like)

    monkeypatch.setattr(atomic, "stage", full_for_trace)
    csv, trace = tmp_path / "r.csv", tmp_path / "r.json"
    refused(capsys, ["profiles", "export", "rec", "--csv", str(csv), "--trace", str(trace),
                     "--profiles-dir", str(profiles)], "the disk is full", "nothing was written")  # fmt: skip
    assert not csv.exists() and not trace.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".r.")]  # no temp left


# --------------------------------------------------------------------------- row 13: escapes


ESC = "\u001b]52;c;aGVsbG8=\u0007\u001b[2J\u001b]0;owned\u0007"


def test_terminal_escapes_from_files_never_reach_the_terminal(profiles, capsys) -> None:
    store = ProfileStore(profiles)
    run = make_run()
    run = type(run)(run.environment | {"device_name": f"cpu{ESC}"}, run.rounds, run.summary,
                    prompt=f"hello{ESC} world", calibration=run.calibration,
                    settings=run.settings)  # fmt: skip
    store.save(Profile("esc", SEED, f"desc{ESC}ription", run))
    d = ["--profiles-dir", str(profiles)]
    for argv in (["profiles", "list"], ["profiles", "show", "esc"], ["profiles", "diff", "esc", "rec"]):
        assert cli.main([*argv, *d]) == 0, argv
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out, (argv, out)
        if argv[1] != "diff":
            assert "description" in " ".join(out.split()), out


def test_shown_strips_escapes_and_controls_and_keeps_text() -> None:
    assert user_text.shown(f"a{ESC}b") == "ab"
    assert user_text.shown("x\x9b31my\x1bcz\x00\x7f") == "xyz"
    assert user_text.shown("tab\tand\nnewline [b]é[/b]") == "tab\tand\nnewline [b]é[/b]"


# --------------------------------------------------------------------------- row 15 and papercuts


@pytest.fixture
def read_only_user_data(tmp_path, monkeypatch) -> Path:
    """A user data folder that cannot be created (under a file: even root cannot)."""
    import core.profile.files as files

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(files.platformdirs, "user_data_dir", lambda app: str(blocker / "data"))
    monkeypatch.delenv(files.PROFILES_ENV, raising=False)
    return blocker


def test_shipped_presets_are_read_without_a_writable_folder(read_only_user_data, capsys) -> None:
    from core.bench.cli import settings_from_args
    from core.profile import load_profile

    assert cli.main(["profiles", "show", "fixed-4-tv1"]) == 0
    assert cli.main(["profiles", "diff", "fixed-4-tv1", "target-only"]) == 0
    assert cli.main(["profiles", "list"]) == 0
    out = capsys.readouterr()
    assert "fixed-4-tv1" in out.out and "Could not create" not in out.err
    assert load_profile("fixed-4-tv1").settings.k == 4  # what chat --profile reads
    args = cli.build_parser().parse_args(["bench", "--profile", "fixed-4-tv1"])
    assert [r.settings.k for r in settings_from_args(args)] == [4]


def test_reading_profiles_creates_no_folder(tmp_path, monkeypatch, capsys) -> None:
    import core.profile.files as files

    user = tmp_path / "user"
    monkeypatch.setattr(files.platformdirs, "user_data_dir", lambda app: str(user / app))
    monkeypatch.delenv(files.PROFILES_ENV, raising=False)
    assert cli.main(["profiles", "list"]) == 0
    assert cli.main(["profiles", "show", "target-only"]) == 0
    assert not user.exists()


def test_a_profile_path_with_a_colon_is_a_path(tmp_path, monkeypatch) -> None:
    from core.bench.cli import settings_from_args, split_profile_spec

    assert split_profile_spec("./a:b.toml") == ("./a:b.toml", "")
    assert split_profile_spec("./a:b.toml:k=3") == ("./a:b.toml", "k=3")
    assert split_profile_spec("fixed-4-tv1:k=3,bonus=true") == ("fixed-4-tv1", "k=3,bonus=true")
    ProfileStore(tmp_path).save(Profile("x", SEED.replace(k=5)))
    colon = tmp_path / "a:b.toml"
    (tmp_path / "x.toml").rename(colon)
    monkeypatch.chdir(tmp_path)
    for spec, k in (("./a:b.toml", 5), ("./a:b.toml:k=3", 3), (str(colon), 5)):
        args = cli.build_parser().parse_args(["bench", "--profile", spec])
        assert [r.settings.k for r in settings_from_args(args)] == [k], spec
