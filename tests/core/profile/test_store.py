"""Profiles on disk: round trips, migration, refusals that touch nothing, atomic saves, the CLI."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import sys
import tempfile
import types
from datetime import datetime
from importlib import metadata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import core.io.atomic as atomic_mod
import core.profile as pm
import core.profile.files as files_mod
import core.profile.store as store_mod
from core.events import CommittedToken, RoundEvent
from core.profile import (
    SCHEMA,
    Profile,
    ProfileError,
    ProfileRecorder,
    ProfileStore,
    diff_settings,
    export_csv,
    load_file,
    profiles_dir,
    record_environment,
    rounds_csv,
    shipped_presets_dir,
)
from core.settings import (
    DISPATCH,
    MAX_K,
    MODES,
    POLICIES,
    RULES,
    STEPS,
    VERIFY_ATTENTION,
    Settings,
)
from tests.helpers import REPO
from tests.helpers.profile import ENV, SEED, make_run

# --------------------------------------------------------------------------- helpers


def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def store(tmp_path: Path) -> ProfileStore:
    return ProfileStore(tmp_path / "profiles")


# --------------------------------------------------------------------------- round trips


@st.composite
def valid_settings(draw: st.DrawFn) -> Settings:
    text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
    k_min, k_max = sorted(draw(st.lists(st.integers(0, MAX_K), min_size=2, max_size=2)))
    lo, hi = sorted(draw(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=2)))
    return Settings(
        target=draw(text),
        draft=draw(text),
        mode=draw(st.sampled_from(MODES)),
        rule=draw(st.sampled_from(RULES)),
        tv_budget=draw(st.floats(0.0, 1.0)),
        policy=draw(st.sampled_from(POLICIES)),
        k=draw(st.integers(0, k_max)),  # k never exceeds k_max (issue 32)
        k_min=k_min,
        k_max=k_max,
        accept_lo=lo,
        accept_hi=hi,
        ema_alpha=draw(st.floats(1e-6, 1.0)),
        temperature=draw(st.floats(0.0, 10.0)),
        top_p=draw(st.floats(1e-6, 1.0)),
        repetition_penalty=draw(st.floats(1e-6, 10.0)),
        repetition_context=draw(st.integers(1, 10_000)),
        seed=draw(st.integers(0, 2**63 - 1)),  # mlx.random.key's range (TOML's ints end here)
        max_tokens=draw(st.integers(1, 1_000_000)),
        ignore_eos=draw(st.booleans()),
        traced=draw(st.booleans()),
        bonus=draw(st.booleans()),
        dispatch=draw(st.sampled_from(DISPATCH)),
        verify_attention=draw(st.sampled_from(VERIFY_ATTENTION)),
        step=draw(st.sampled_from(STEPS)),
        prefill_chunk=draw(st.integers(1, 2**16)),  # MAX_PREFILL_CHUNK
    )


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    settings=valid_settings(),
    description=st.text(st.characters(blacklist_categories=("Cs",)), max_size=60),
)
def test_any_valid_settings_survive_save_and_load(settings: Settings, description: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = ProfileStore(tmp)
        saved = store.save(Profile("fuzz", settings, description))
        loaded = store.load(saved)
    assert saved == "fuzz"
    assert loaded.settings == settings
    assert loaded.description == description
    assert loaded.run is None


def test_recorded_run_round_trips_with_every_round(store: ProfileStore) -> None:
    profile = Profile("rec", SEED.replace(k=6), "with a run", make_run(SEED.replace(k=6)))
    assert store.save(profile) == "rec"
    loaded = store.load("rec")
    assert loaded == profile
    assert loaded.run is not None
    assert loaded.run.rounds[0].rejected == (7, 8, 6)
    assert loaded.run.rounds[1].tokens[-1] == CommittedToken(15, "bonus")
    assert loaded.run.rounds[1].tv is None
    assert loaded.run.calibration == {
        "backend": "cpu",
        "rows": [1, 2, 4],
        "t_verify_s": [0.01, 0.02, 0.04],
    }
    assert not loaded.run_is_stale
    doc = json.loads(store.run_path("rec").read_text())
    assert doc["schema"] == SCHEMA
    assert store.load("rec", with_run=False).run is None


def test_settings_file_is_plain_toml_with_schema_and_every_setting(store: ProfileStore) -> None:
    store.save(Profile("plain", SEED.replace(tv_budget=0.75), "one line"))
    import tomllib

    doc = tomllib.loads(store.toml_path("plain").read_text())
    assert doc["schema"] == SCHEMA
    assert doc["description"] == "one line"
    assert doc["settings"]["tv_budget"] == 0.75
    assert set(doc["settings"]) == set(Settings.__dataclass_fields__)


# --------------------------------------------------------------------------- saves never clobber


def test_save_without_overwrite_picks_the_next_free_name(store: ProfileStore) -> None:
    assert store.save(Profile("mine", SEED)) == "mine"
    before = snapshot(store.toml_path("mine"))
    assert store.save(Profile("mine", SEED.replace(k=6))) == "mine-2"
    assert store.save(Profile("mine", SEED.replace(k=8))) == "mine-3"
    assert snapshot(store.toml_path("mine")) == before
    assert store.load("mine").settings.k == 4
    assert store.load("mine-2").settings.k == 6
    assert store.load("mine-3").settings.k == 8


def test_an_orphan_run_file_also_holds_its_name(store: ProfileStore) -> None:
    store.directory.mkdir(parents=True)
    store.run_path("lonely").write_text("{}")
    assert store.save(Profile("lonely", SEED)) == "lonely-2"
    assert store.run_path("lonely").read_text() == "{}"


def test_overwrite_replaces_and_drops_a_run_recorded_under_other_settings(
    store: ProfileStore,
) -> None:
    store.save(Profile("p", SEED, "old", make_run()))
    assert store.save(Profile("p", SEED.replace(k=8), "new"), overwrite=True) == "p"
    loaded = store.load("p")
    assert (loaded.settings.k, loaded.description, loaded.run) == (8, "new", None)
    assert not store.run_path("p").exists()


def test_a_run_recorded_under_other_settings_is_marked_stale(store: ProfileStore) -> None:
    store.save(Profile("p", SEED, "", make_run(SEED)))
    path = store.toml_path("p")
    path.write_text(path.read_text().replace("k = 4", "k = 5"))
    assert store.load("p").run_is_stale


# --------------------------------------------------------------------------- migration


V1_TOML = """\
schema = 1
description = "from the old days"

[settings]
mode = "speculative"
rule = "mentored"
tv = 0.5
draft_len = 6
temperature = 0.7
"""


def test_schema_1_is_migrated_in_memory_and_the_file_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "old.toml"
    path.write_text(V1_TOML)
    before = snapshot(path)
    profile = ProfileStore(tmp_path).load("old")
    assert profile.settings.tv_budget == 0.5
    assert profile.settings.k == 6
    assert profile.settings.bonus is False  # the v1 engine had no bonus token
    assert profile.description == "from the old days"
    assert snapshot(path) == before


def test_schema_1_run_settings_are_migrated_too(tmp_path: Path) -> None:
    (tmp_path / "old.toml").write_text(V1_TOML)
    doc = files_mod.run_to_doc(make_run())
    doc["schema"] = 1
    doc["settings"] = {"tv": 0.5, "draft_len": 6, "temperature": 0.7}
    (tmp_path / "old.run.json").write_text(json.dumps(doc))
    profile = ProfileStore(tmp_path).load("old")
    assert profile.run is not None and profile.run.settings is not None
    assert (profile.run.settings.tv_budget, profile.run.settings.k) == (0.5, 6)
    assert not profile.run_is_stale


def test_saving_a_migrated_profile_writes_the_current_schema(tmp_path: Path) -> None:
    (tmp_path / "old.toml").write_text(V1_TOML)
    store = ProfileStore(tmp_path)
    store.save(store.load("old"), overwrite=True)
    text = (tmp_path / "old.toml").read_text()
    assert f"schema = {SCHEMA}" in text
    assert "tv_budget = 0.5" in text and "\ntv =" not in text
    assert store.load("old").settings.k == 6


def test_schema_1_with_both_old_and_new_key_is_refused(tmp_path: Path) -> None:
    (tmp_path / "both.toml").write_text(V1_TOML + "tv_budget = 0.2\n")
    with pytest.raises(ProfileError, match="both tv and tv_budget"):
        ProfileStore(tmp_path).load("both")


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("schema = 3\n[settings]\nk = 4\n", "newer specdec-tui (schema 3"),
        ("schema = 2\n[settings\nk = 4\n", "not valid TOML"),
        ("[settings]\nk = 4\n", "no valid schema version"),
        ('schema = "two"\n[settings]\n', "no valid schema version"),
        ("schema = 2\nsettings = 5\n", "no [settings] table"),
        (b"schema = 2\n\xff\xfe".decode("latin-1"), "not valid TOML"),
    ],
)
def test_newer_or_corrupt_settings_are_refused_untouched(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(text.encode("latin-1"))
    before = snapshot(path)
    store = ProfileStore(tmp_path)
    with pytest.raises(ProfileError) as info:
        store.load("bad")
    message = str(info.value)
    assert fragment in message
    assert message.count(". ") == 0 and message.endswith(".")  # one sentence
    # A save under the same name neither repairs nor replaces it.
    assert store.save(Profile("bad", SEED)) == "bad-2"
    assert snapshot(path) == before
    assert [i.error is not None for i in store.list() if i.name == "bad"] == [True]


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: d.update(schema=9), "newer specdec-tui (schema 9"),
        (lambda d: d.pop("summary"), "missing 'summary'"),
        (lambda d: d["rounds"][0].update(nonsense=1), "corrupt"),
    ],
)
def test_newer_or_corrupt_runs_are_refused_untouched(
    store: ProfileStore, mutate, fragment: str
) -> None:
    store.save(Profile("r", SEED, "", make_run()))
    path = store.run_path("r")
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))
    before = snapshot(path)
    with pytest.raises(ProfileError, match=fragment.replace("(", r"\(")):
        store.load("r")
    assert snapshot(path) == before
    assert store.load("r", with_run=False).settings == SEED  # settings still reachable


def test_truncated_run_json_is_refused(store: ProfileStore) -> None:
    store.save(Profile("r", SEED, "", make_run()))
    path = store.run_path("r")
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(ProfileError, match="not valid JSON"):
        store.load("r")


def test_unknown_setting_is_named_in_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "typo.toml").write_text("schema = 2\n[settings]\ntv_budgett = 0.5\n")
    with pytest.raises(ProfileError) as info:
        ProfileStore(tmp_path).load("typo")
    assert str(info.value) == f"{tmp_path / 'typo.toml'}: unknown setting(s): tv_budgett."


def test_unknown_top_level_key_and_bad_values_are_refused(tmp_path: Path) -> None:
    (tmp_path / "top.toml").write_text("schema = 2\n[setting]\nk = 4\n[settings]\n")
    (tmp_path / "range.toml").write_text("schema = 2\n[settings]\ntv_budget = 1.5\n")
    (tmp_path / "table.toml").write_text("schema = 2\n[settings]\ntarget = {a = 1}\n")
    store = ProfileStore(tmp_path)
    with pytest.raises(ProfileError, match="unknown top-level key.s. setting;"):
        store.load("top")
    with pytest.raises(ProfileError, match="tv_budget must be between 0 and 1; got 1.5"):
        store.load("range")
    with pytest.raises(ProfileError, match="setting target must be a single value"):
        store.load("table")


@pytest.mark.parametrize("name", ["", "../up", "a/b", "a\\b", ".hidden", "-flag", "x" * 101])
def test_names_that_could_escape_the_folder_are_refused(store: ProfileStore, name: str) -> None:
    with pytest.raises(ProfileError, match="is not allowed"):
        store.save(Profile(name, SEED))
    assert not store.directory.exists() or list(store.directory.iterdir()) == []


def test_missing_profile_says_where_it_looked(store: ProfileStore) -> None:
    with pytest.raises(ProfileError, match=r"no profile named 'nope' in .*profiles list"):
        store.load("nope")


# --------------------------------------------------------------------------- atomic writes


def enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


class HalfWriter:
    """A file whose write stores half the bytes, then finds the disk full."""

    def __init__(self, f: io.BufferedWriter) -> None:
        self.f = f

    def write(self, data: bytes) -> int:
        self.f.write(data[: len(data) // 2])
        self.f.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self) -> HalfWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()


@pytest.mark.parametrize("where", ["write", "fsync", "replace"])
@pytest.mark.parametrize("with_run", [False, True])
def test_failed_overwrite_leaves_the_old_profile_intact_and_no_temp_files(
    store: ProfileStore, monkeypatch: pytest.MonkeyPatch, where: str, with_run: bool
) -> None:
    store.save(Profile("keep", SEED, "the original", make_run()))
    toml_before = snapshot(store.toml_path("keep"))
    run_before = snapshot(store.run_path("keep"))
    new = Profile("keep", SEED.replace(k=8), "the new one", make_run(e2e=9.0) if with_run else None)
    with monkeypatch.context() as m:
        if where == "write":
            real = os.fdopen
            m.setattr(atomic_mod.os, "fdopen", lambda fd, mode: HalfWriter(real(fd, mode)))
        elif where == "fsync":
            m.setattr(atomic_mod.os, "fsync", enospc)
        else:
            m.setattr(store_mod.os, "replace", enospc)
        with pytest.raises(ProfileError) as info:
            store.save(new, overwrite=True)
    assert str(info.value) == (
        f"Could not save profile 'keep' in {store.directory}: the disk is full; "
        "nothing was changed."
    )
    assert snapshot(store.toml_path("keep")) == toml_before
    assert snapshot(store.run_path("keep")) == run_before
    assert leftovers(store.directory) == []
    assert store.load("keep").description == "the original"


def test_failed_run_publish_on_a_fresh_name_creates_nothing(
    store: ProfileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.directory.mkdir(parents=True)

    def refuse_runs(real):
        def publish(src, dst, *a, **kw):
            if str(dst).endswith(pm.RUN_SUFFIX):
                raise PermissionError(errno.EACCES, "Permission denied")
            return real(src, dst, *a, **kw)

        return publish

    monkeypatch.setattr(atomic_mod.os, "link", refuse_runs(os.link))
    monkeypatch.setattr(store_mod.os, "replace", refuse_runs(os.replace))
    with pytest.raises(ProfileError, match="permission denied; nothing was changed"):
        store.save(Profile("fresh", SEED, "", make_run()))
    assert list(store.directory.iterdir()) == []


def test_save_works_where_hard_links_are_not_supported(
    store: ProfileStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(atomic_mod.os, "link", _no_links)
    assert store.save(Profile("x", SEED, "", make_run())) == "x"
    assert store.save(Profile("x", SEED)) == "x-2"
    assert store.load("x").run is not None
    assert leftovers(store.directory) == []


def _no_links(*args, **kwargs) -> None:
    raise OSError(errno.EPERM, "Operation not permitted")


def test_saved_files_are_readable_by_others_not_private_temp_modes(store: ProfileStore) -> None:
    store.save(Profile("m", SEED, "", make_run()))
    assert store.toml_path("m").stat().st_mode & 0o777 == 0o644
    assert store.run_path("m").stat().st_mode & 0o777 == 0o644


# --------------------------------------------------------------------------- where profiles live


def test_profiles_dir_prefers_override_then_environment_then_user_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(files_mod.PROFILES_ENV, raising=False)
    user = tmp_path / "user-data"
    monkeypatch.setattr(files_mod.platformdirs, "user_data_dir", lambda app: str(user / app))
    assert profiles_dir(None) == user / "specdec-tui" / "profiles"
    assert not (user / "specdec-tui").exists()  # naming the folder creates nothing (issue 32)
    ProfileStore.default(None).save(Profile("made", SEED))  # a save creates it
    assert (user / "specdec-tui" / "profiles" / "made.toml").is_file()
    (tmp_path / "profiles").mkdir()  # a profiles/ in the working folder (a checkout) is not used
    assert profiles_dir(None) == user / "specdec-tui" / "profiles"
    monkeypatch.setenv(files_mod.PROFILES_ENV, str(tmp_path / "from-env"))
    assert profiles_dir(None) == tmp_path / "from-env"
    assert profiles_dir(str(tmp_path / "elsewhere")) == tmp_path / "elsewhere"
    (tmp_path / "afile").write_text("")
    with pytest.raises(ProfileError, match="is a file, not a folder"):
        profiles_dir(str(tmp_path / "afile"))


# --------------------------------------------------------------------------- shipped presets

EXPECTED_PRESETS = {
    # name: (mode, rule, tv_budget, policy, k, k_min, k_max, bonus)
    "target-only": ("target-only", None, None, None, None, None, None, False),
    "draft-only": ("draft-only", None, None, None, None, None, None, False),
    "lossless-fixed-4": ("speculative", "lossless", 0.0, "fixed", 4, None, None, False),
    "fixed-4-tv1": ("speculative", "mentored", 1.0, "fixed", 4, None, None, False),
    "fixed-6-tv1": ("speculative", "mentored", 1.0, "fixed", 6, None, None, False),
    "fixed-8-tv1": ("speculative", "mentored", 1.0, "fixed", 8, None, None, False),
    "fixed-8-tv0.75": ("speculative", "mentored", 0.75, "fixed", 8, None, None, False),
    "fixed-8-tv0.5": ("speculative", "mentored", 0.5, "fixed", 8, None, None, False),
    "adaptive-acceptance": ("speculative", "lossless", 0.0, "acceptance-rate", 4, 1, 8, False),
    "cost-aware": ("speculative", "lossless", 0.0, "cost-aware", 4, 1, 8, True),
}


def test_every_shipped_preset_loads_with_the_seed_settings() -> None:
    presets = shipped_presets_dir()
    assert presets == REPO / "profiles"
    store = ProfileStore(presets)
    assert set(store.names()) >= set(EXPECTED_PRESETS)
    for name, (mode, rule, tv, policy, k, k_min, k_max, bonus) in EXPECTED_PRESETS.items():
        p = store.load(name)
        s = p.settings
        # EOS is honoured: a chat from a preset ends with its answer; the bench ignores EOS
        # on every request itself (the seed's protocol), whatever the preset says.
        assert (s.temperature, s.repetition_penalty, s.max_tokens, s.ignore_eos) == (
            0.7,
            1.1,
            256,
            False,
        ), name
        assert (s.target, s.draft, s.mode, s.bonus) == ("default", "self:bits=4", mode, bonus), name
        for field, want in (
            ("rule", rule),
            ("tv_budget", tv),
            ("policy", policy),
            ("k", k),
            ("k_min", k_min),
            ("k_max", k_max),
        ):
            if want is not None:
                assert getattr(s, field) == want, (name, field)
        assert p.description and "\n" not in p.description, name
        assert ("bonus" in p.description) == (s.mode == "speculative"), name
    adaptive = store.load("adaptive-acceptance").settings
    assert (adaptive.accept_lo, adaptive.accept_hi) == (0.4, 0.8)


def test_presets_are_a_read_only_fallback_for_names(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "mine", presets=shipped_presets_dir())
    assert store.load("fixed-8-tv1").settings.k == 8
    saved = store.save(store.load("fixed-8-tv1"))
    assert saved == "fixed-8-tv1-2"  # never shadows a preset unasked
    assert (tmp_path / "mine" / "fixed-8-tv1-2.toml").is_file()
    infos = {i.name: i for i in store.list()}
    assert infos["fixed-8-tv1"].preset and not infos["fixed-8-tv1-2"].preset


# --------------------------------------------------------------------------- recorder, environment


def test_recorder_turns_the_stream_into_a_profile() -> None:
    run = make_run()
    rec = ProfileRecorder("live", SEED, "from the app")
    with pytest.raises(ProfileError, match="has not finished"):
        rec.profile(environment=ENV)
    for item in (*run.rounds, run.summary):
        rec.add(item)
    curve = types.SimpleNamespace(to_dict=lambda: {"boundary": 5})
    profile = rec.profile(prompt="hello", calibration=curve, environment=ENV)
    assert profile.name == "live" and profile.description == "from the app"
    assert profile.run is not None
    assert profile.run.rounds == run.rounds
    assert profile.run.summary == run.summary
    assert profile.run.calibration == {"boundary": 5}
    assert profile.run.prompt == "hello"
    assert profile.run.settings == SEED
    with pytest.raises(TypeError):
        rec.add("not an event")  # type: ignore[arg-type]
    with pytest.raises(ProfileError, match="not allowed"):
        ProfileRecorder("../x", SEED)


def test_record_environment_describes_this_machine() -> None:
    import mlx.core as mx

    env = record_environment()
    expected = "cpu" if mx.default_device().type == mx.cpu else env["backend"]
    assert env["backend"] == expected and env["backend"] in {"cpu", "metal", "cuda", "gpu"}
    assert env["mlx"] == metadata.version("mlx")
    assert env["mlx_lm"] == metadata.version("mlx-lm")
    assert env["device_name"] == mx.device_info().get("device_name", "")
    assert (
        env["python"]
        == f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    )
    assert datetime.fromisoformat(env["timestamp"]).utcoffset().total_seconds() == 0
    json.dumps(env)  # it goes into a JSON file as is


def test_record_environment_keeps_mlx_tuning_variables(monkeypatch) -> None:
    """MLX_* variables change timings (on CUDA the cuDNN attention plan cache's size decides
    whether multi-row attention rebuilds a plan every round): a run says which it ran with."""
    monkeypatch.setenv("MLX_CUDA_SDPA_CACHE_SIZE", "4096")
    monkeypatch.setenv("NOT_MLX", "x")
    env = record_environment()["mlx_env"]
    assert env["MLX_CUDA_SDPA_CACHE_SIZE"] == "4096" and "NOT_MLX" not in env


def test_record_environment_names_the_backend_as_dispatch_does() -> None:
    from core.dispatch.backend import backend_name

    assert record_environment()["backend"] == backend_name()


# --------------------------------------------------------------------------- diff and CSV


def test_diff_lists_only_what_differs() -> None:
    a, b = SEED.replace(k=4, tv_budget=1.0), SEED.replace(k=8, tv_budget=1.0, bonus=True)
    assert diff_settings(a, b) == [("k", 4, 8), ("bonus", False, True)]
    assert diff_settings(a, a) == []


def test_rounds_csv_has_one_row_per_round_with_phase_ms() -> None:
    rows = list(csv.DictReader(io.StringIO(rounds_csv(make_run()))))
    assert len(rows) == 2
    first, second = rows
    assert (first["index"], first["tokens"], first["proposed"], first["accepted"]) == (
        "0",
        "2",
        "4",
        "1",
    )
    assert (first["rows"], first["kernel"], first["tv"], first["traced"]) == (
        "5",
        "qmm",
        "0.125",
        "1",
    )
    assert float(first["verify_ms"]) == pytest.approx(20.0)
    assert float(first["total_ms"]) == pytest.approx(34.5)
    # the draft source of each round and the copies it kept (issue 29: no source column)
    assert (first["source"], first["copied"]) == ("", "0")
    assert (second["tokens"], second["tv"], second["draft_ms"]) == ("5", "", "0.0000")


def test_export_to_a_missing_folder_says_so_in_one_sentence(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "rounds.csv"
    with pytest.raises(ProfileError) as info:
        export_csv(Profile("p", SEED, "", make_run()), target)
    assert str(info.value) == (
        f"Could not write {target}: no such file or directory; nothing was changed."
    )
    assert not (tmp_path / "missing").exists()


# --------------------------------------------------------------------------- CLI through core.cli.main


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """core.cli.main, with stand-ins for subcommand modules not written yet (bench, dispatch)."""
    import importlib

    import core

    stubs = {"core.bench": "add_bench_arguments", "core.calibrate.cli": "add_calibrate_arguments"}
    for module, hook in stubs.items():
        try:
            importlib.import_module(module)
        except ImportError:
            stub = types.ModuleType(module)
            setattr(stub, hook, lambda p: None)
            monkeypatch.setitem(sys.modules, module, stub)
            monkeypatch.setattr(core, module.split(".")[1], stub, raising=False)
    from core.cli import main

    store = ProfileStore(tmp_path / "p")
    monkeypatch.setenv("COLUMNS", "160")

    def run(*argv: str) -> int:
        return main(["--profiles-dir", str(store.directory), "profiles", *argv])

    run.store = store  # type: ignore[attr-defined]
    return run


def test_cli_list_shows_saved_profiles_and_presets(cli, capsys) -> None:
    cli.store.save(Profile("mine", SEED, "my tuned one", make_run()))
    assert cli("list") == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if " mine " in ln)
    assert "yes" in line and "saved" in line and "my tuned one" in line
    line = next(ln for ln in out.splitlines() if " fixed-8-tv0.75 " in ln)
    assert "preset" in line and "yes" not in line


def test_cli_show_prints_settings_and_the_run(cli, capsys) -> None:
    cli.store.save(Profile("mine", SEED.replace(k=6), "my tuned one", make_run(SEED.replace(k=6))))
    assert cli("show", "mine") == 0
    out = capsys.readouterr().out
    assert "my tuned one" in out
    k_line = next(ln for ln in out.splitlines() if " k " in ln)
    assert "6" in k_line and "4" in k_line  # value and the default it differs from
    assert next(ln for ln in out.splitlines() if "acceptance " in ln).count("0.625") == 1
    assert "Test CPU" in out and "verify ms" in out


def test_cli_show_puts_the_runs_own_settings_beside_the_profiles(cli, capsys) -> None:
    """A profile saved at k 6 after its run ran at k 4: `show` printed k 6 beside the run."""
    cli.store.save(Profile("moved", SEED.replace(k=6), "", make_run(SEED.replace(k=4))))
    assert cli("show", "moved") == 0
    out = capsys.readouterr().out
    assert "its recorded run" in out
    k_line = next(ln for ln in out.splitlines() if " k " in ln)
    cells = [c.strip() for c in k_line.split("│")]
    assert cells[2] == "6" and cells[-2] == "4", cells
    tv_line = next(ln for ln in out.splitlines() if " tv_budget " in ln)
    assert tv_line.split("│")[-2].strip() == ""  # the same value is not repeated


def test_cli_diff_shows_only_differing_settings_and_metrics(cli, capsys) -> None:
    cli.store.save(Profile("a", SEED, "", make_run(SEED, e2e=0.5)))
    b = SEED.replace(k=8, tv_budget=0.5)
    cli.store.save(Profile("b", b, "", make_run(b, e2e=0.25)))
    assert cli("diff", "a", "b") == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(" k " in ln and "4" in ln and "8" in ln for ln in lines)
    assert any("tv_budget" in ln and "0.5" in ln for ln in lines)
    assert not any(" temperature " in ln for ln in lines)
    e2e = next(ln for ln in lines if "E2E s" in ln)
    assert "0.5" in e2e and "0.25" in e2e and "0.5x" in e2e
    assert any("verify ms" in ln and "40" in ln for ln in lines)


def test_cli_diff_without_runs_says_so(cli, capsys) -> None:
    assert cli("diff", "fixed-8-tv1", "fixed-8-tv0.5") == 0
    out = capsys.readouterr().out
    assert "tv_budget" in out
    assert "no recorded run for fixed-8-tv1, fixed-8-tv0.5" in out


def test_lookup_presets_save_the_draft_source_and_profiles_show_it(cli, capsys) -> None:
    store = ProfileStore(shipped_presets_dir())
    want = {"lookup": ("lookup", "cost-aware"), "hybrid": ("hybrid", "heuristic"),
            "hybrid-cost-aware": ("hybrid", "cost-aware")}
    for name, (source, policy) in want.items():
        p = store.load(name)
        assert (p.settings.draft_source, p.settings.policy, p.settings.mode) == (
            source, policy, "speculative"), name
        assert p.settings.repetition_penalty == 1.0, name  # a penalty would fight the copy
        assert p.description and "\n" not in p.description and "bonus" in p.description, name
    assert cli("diff", "hybrid", "lookup") == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("draft_source" in ln and "hybrid" in ln and "lookup" in ln for ln in lines)
    assert cli("show", "lookup") == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "draft_source" in ln)
    # its value and the default it differs from: what the app and `chat` start from (hybrid,
    # cost-aware), not Settings()'s model/fixed/4 (issue 29: one default, shown as it is)
    assert "lookup" in line and "hybrid" in line
    assert "first run (app, chat)" in out
    assert not any(ln.split()[:1] == ["policy"] and "fixed" in ln for ln in out.splitlines())


def test_cli_export_writes_rounds_as_csv(cli, capsys, tmp_path: Path) -> None:
    cli.store.save(Profile("mine", SEED, "", make_run()))
    target = tmp_path / "rounds.csv"
    assert cli("export", "mine", "--csv", str(target)) == 0
    rows = list(csv.DictReader(target.open()))
    assert [r["kernel"] for r in rows] == ["qmm", "qmv"]
    assert "wrote 2 rounds" in capsys.readouterr().out


def test_cli_export_without_a_run_is_one_sentence_and_exit_2(cli, capsys, tmp_path: Path) -> None:
    target = tmp_path / "rounds.csv"
    assert cli("export", "target-only", "--csv", str(target)) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "specdec-tui: Profile 'target-only' has no recorded run to export; record one from "
        "the app or the bench first."
    )
    assert not target.exists()


def test_cli_show_of_a_corrupt_profile_is_exit_2_and_untouched(cli, capsys) -> None:
    cli.store.directory.mkdir(parents=True)
    path = cli.store.toml_path("broken")
    path.write_text("schema = 2\n[settings\n")
    before = snapshot(path)
    assert cli("show", "broken") == 2
    assert "is corrupt (not valid TOML" in capsys.readouterr().err
    assert snapshot(path) == before


def test_cli_accepts_profiles_dir_after_the_action(cli, capsys, tmp_path: Path) -> None:
    from core.cli import main

    other = ProfileStore(tmp_path / "other")
    other.save(Profile("elsewhere", SEED, "found it"))
    assert main(["profiles", "show", "elsewhere", "--profiles-dir", str(other.directory)]) == 0
    assert "found it" in capsys.readouterr().out


def test_show_accepts_a_path_to_a_toml_file(cli, capsys, tmp_path: Path) -> None:
    path = tmp_path / "loose" / "side.toml"
    path.parent.mkdir()
    path.write_text(V1_TOML)
    assert load_file(path).settings.k == 6
    assert cli("show", str(path)) == 0
    assert "from the old days" in capsys.readouterr().out


# --------------------------------------------------------------------------- with the real engine


def test_a_real_engine_run_is_recorded_saved_and_loaded_unchanged(store: ProfileStore) -> None:
    """The events the engine really yields (not hand-made ones) must survive JSON."""
    import core.decode.engine as engine_mod
    from tests.helpers.tiny import tiny_llama

    def tiny(seed: int):  # a plain random llama: its weights as initialised
        return tiny_llama(2, seed, vocab=64, embed_scale=1.0, head_scale=1.0)

    engine = engine_mod.Engine(tiny(1), tiny(2), vocab_size=64)
    settings = SEED.replace(max_tokens=12, k=3, tv_budget=1.0, rule="mentored")
    rec = ProfileRecorder("engine-run", settings, "tiny random pair")
    for item in engine.generate([1, 2, 3, 4], settings):
        rec.add(item)
    profile = rec.profile(prompt="1 2 3 4")
    assert profile.run is not None
    assert profile.run.summary.tokens == 12
    assert profile.run.summary.acceptance == 1.0  # TV budget 1 accepts every draft
    assert profile.run.environment["backend"] in {"cpu", "metal", "cuda", "gpu"}
    assert store.save(profile) == "engine-run"
    assert store.load("engine-run") == profile


def test_rounds_csv_names_each_rounds_draft_source() -> None:
    """A hybrid run's rounds apart by source in the CSV, with the copies each kept."""
    import dataclasses

    run = make_run()
    copy = dataclasses.replace(run.rounds[0], source="lookup", tokens=(
        CommittedToken(5, "copied"), CommittedToken(6, "copied"), CommittedToken(9, "corrected")))
    model = dataclasses.replace(run.rounds[1], source="model")
    rows = list(csv.DictReader(io.StringIO(rounds_csv(dataclasses.replace(
        run, rounds=(copy, model))))))
    assert [(r["source"], r["copied"]) for r in rows] == [("lookup", "2"), ("model", "0")]


def test_profiles_prints_plain_numbers() -> None:
    """`profiles diff` printed 1.246e+05 (issue 29): no exponent form, at any size."""
    from core.profile.cli import plain_number

    assert plain_number(124_600.0) == "124,600"
    assert plain_number(13.7137) == "13.71"
    assert plain_number(0.625) == "0.625"
    assert plain_number(0.0000123) == "0.0000123"
    assert plain_number(0.0) == "0"
    for value in (1e-9, 3.2e-5, 0.5, 7.0, 999.9, 1e5, 2.5e9, -4.2e6):
        assert "e" not in plain_number(value), value


def test_saving_over_a_profile_keeps_its_hand_written_description(tmp_path) -> None:
    """In the app, ctrl+s then Enter on the active profile's name rewrote its TOML with
    `description = ""`: the save dialog edits settings and the name, never the description."""
    store = ProfileStore(tmp_path)
    store.save(Profile("mine", SEED, "my notes: fast on code, keep TV low"))
    saved = store.save(Profile("mine", SEED.replace(k=5)), overwrite=True)
    assert saved == "mine"
    again = store.load("mine")
    assert again.settings.k == 5 and again.description == "my notes: fast on code, keep TV low"
    # a description given with the save is the one written
    store.save(Profile("mine", SEED, "new words"), overwrite=True)
    assert store.load("mine").description == "new words"


def test_a_tree_rounds_nodes_and_branches_round_trip_and_are_checked() -> None:
    """A tree round's `nodes` and `branches` survive to_dict/from_dict, and a saved run's
    check refuses branches that are not lists of token ids."""
    from core.profile.run_check import check_round

    ev = RoundEvent(index=0, tokens=(CommittedToken(5, "copied"),), rejected=(7,), proposed=3,
                    accepted=1, rows=9, nodes=8, branches=((7, 1), (9,)), source="tree")
    d = json.loads(json.dumps(ev.to_dict()))
    check_round(d, 0)
    assert RoundEvent.from_dict(d) == ev
    for bad in ([7, 9], [[7, "x"]], [[-1]]):
        with pytest.raises((TypeError, ValueError)):
            check_round({**d, "branches": bad}, 0)
    with pytest.raises((TypeError, ValueError)):
        check_round({**d, "nodes": -2}, 0)
