"""Provenance: every record names the models that ran and the code that measured them.

A bench of `shape:tiny` names it in every row (not only in the command line), a saved run
keeps its models through disk and a run saved before identities still loads (as unknown), a
Chrome trace names them, file digests are the files' sha256 and are hashed once per file
version, and the environment carries the tool's version and commit.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import subprocess

import pytest

from core import bench
from core.decode.engine import Engine
from core.events import RunSummary
from core.identity import ModelIdentity
from core.models import identify as I
from core.models import load_model, load_pair, save_mlx_folder
from core.models.identify import identify, pair_identities
from core.profile import ProfileRecorder, ProfileStore, TracedRequest, chrome_trace
from core.profile.files import RUN_SUFFIX
from core.settings import Settings
from core.version import tool_version, version_text
from tests.helpers import REPO as ROOT

TINY = ("shape:tiny", "shape:tiny-draft")


def tiny_parameters(layers: int) -> int:
    """shape:tiny's parameters from its config: tied 512 x 64 embedding, per layer q and o
    64 x 64, k and v 32 x 64 (2 kv heads of 16), gate, up and down 128 x 64, two norms of 64;
    a final norm of 64."""
    per_layer = 2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64 + 2 * 64
    return 512 * 64 + layers * per_layer + 64


@pytest.fixture
def hash_cache(tmp_path, monkeypatch):
    """A fresh model cache (where digests are kept) and no digests in this process yet."""
    monkeypatch.setenv("SPECDEC_TUI_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(I, "_HASHES", {})
    return tmp_path / "cache" / I.HASH_CACHE_NAME


# --------------------------------------------------------------------------- the bench


def test_a_bench_of_shape_tiny_names_it_in_every_result(tmp_path) -> None:
    """The issue's goal: `--target shape:tiny` under presets whose target is `default`."""
    js, md, cs = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "r.csv"
    from core.cli import build_parser

    args = build_parser().parse_args([
        "bench", "--target", TINY[0], "--draft", TINY[1], "--tokens", "4", "--seeds", "1",
        "--invocations", "1", "--warmup", "0", "--no-quality", "--no-predict",
        "--profile", "target-only", "--profile", "fixed-4-tv1",
        "--json", str(js), "--markdown", str(md), "--csv", str(cs),
    ])
    assert Settings().target == "default"  # what the presets would have written
    assert bench.run_bench_cli(args) == 0
    doc = json.loads(js.read_text())
    for row in doc["results"]:
        assert (row["settings"]["target"], row["settings"]["draft"]) == TINY, row["name"]
        target = row["models"]["target"]
        assert target["spec"] == "shape:tiny" and target["kind"] == "shape"
        assert (target["shape"], target["seed"], target["architecture"]) == ("tiny", 0, "llama")
        assert target["parameters"] == tiny_parameters(2) and target["layers"] == 2
        assert (target["bits"], target["group_size"], target["sha256"]) == (4, 64, None)
    base, spec = doc["results"]
    assert base["models"]["draft"] is None  # target-only ran no draft
    assert spec["models"]["draft"]["spec"] == "shape:tiny-draft"
    assert spec["models"]["draft"]["parameters"] == tiny_parameters(1)
    assert doc["protocol"]["models"]["identities"]["target"]["spec"] == "shape:tiny"
    env = doc["environment"]
    assert env["specdec_tui"] == tool_version()["version"] is not None
    text = md.read_text()
    assert "Target: shape:tiny (shape, llama, 107k parameters, 2 layers, 4-bit g64, " \
           "shape tiny, seed 0)" in text
    assert f"Measured by {version_text(env)}" in text
    rows = list(csv.DictReader(cs.read_text().splitlines()))
    assert [(r["target"], r["draft"]) for r in rows] == [TINY, TINY]


def test_the_protocol_stamps_what_the_engine_loaded(tiny_pair) -> None:
    """The app's `b` key calls run_protocol directly: its rows name the loaded pair too, even
    when the settings handed in say otherwise."""
    engine = Engine.from_pair(tiny_pair)
    report = bench.run_protocol(engine, list(range(3, 30)), [Settings(k=2)], tokens=4, seeds=1,
                                invocations=1, warmup=0, traced=False, quality=False,
                                predict=False)
    for r in report.results:
        assert (r.settings["target"], r.settings["draft"]) == TINY
        assert r.models["target"] == engine.models["target"]


# --------------------------------------------------------------------------- saved runs


def _recorded(pair, settings: Settings, name: str = "run"):  # noqa: ANN001, ANN202
    engine = Engine.from_pair(pair)
    rec = ProfileRecorder(name, settings)
    for item in engine.generate(list(range(3, 20)), settings.replace(max_tokens=6)):
        rec.add(item)
    return rec.profile(environment={"backend": "cpu", "specdec_tui": "0.1.0",
                                    "specdec_tui_commit": "abc", "specdec_tui_dirty": False})


def test_a_saved_run_keeps_its_models_through_disk(tmp_path, tiny_pair) -> None:
    profile = _recorded(tiny_pair, Settings(k=2, tv_budget=0.5))
    models = profile.run.summary.models
    assert models == pair_identities(tiny_pair)
    store = ProfileStore(tmp_path)
    store.save(profile)
    back = store.load("run").run
    assert back.summary.models == models and back.summary == profile.run.summary
    assert back.environment["specdec_tui_commit"] == "abc"


def test_a_target_only_run_names_no_draft(tiny_pair) -> None:
    profile = _recorded(tiny_pair, Settings(mode="target-only"))
    assert profile.run.summary.models["target"].spec == "shape:tiny"
    assert profile.run.summary.models["draft"] is None


def test_an_old_run_file_without_models_still_loads(tmp_path, tiny_pair, capsys,
                                                   monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # lines unwrapped, whatever the terminal
    store = ProfileStore(tmp_path)
    store.save(_recorded(tiny_pair, Settings(k=2), "old"))
    path = tmp_path / ("old" + RUN_SUFFIX)
    doc = json.loads(path.read_text())
    del doc["summary"]["models"]
    for key in ("specdec_tui", "specdec_tui_commit", "specdec_tui_dirty"):
        del doc["environment"][key]
    path.write_text(json.dumps(doc))
    run = store.load("old").run
    assert run.summary.models is None
    from core.cli import main

    assert main(["--profiles-dir", str(tmp_path), "profiles", "show", "old"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "measured by │ specdec-tui version unknown, commit unknown" in out
    assert "target │ unknown" in out and "draft │ unknown" in out


def test_profiles_show_names_the_models(tmp_path, tiny_pair, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    ProfileStore(tmp_path).save(_recorded(tiny_pair, Settings(k=2)))
    from core.cli import main

    assert main(["--profiles-dir", str(tmp_path), "profiles", "show", "run"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "target │ shape:tiny (shape, llama, 107k parameters" in out
    assert "draft │ shape:tiny-draft (shape, llama, 69.8k parameters" in out
    assert "measured by │ specdec-tui 0.1.0 at abc" in out


# --------------------------------------------------------------------------- the trace


def test_the_chrome_trace_names_the_models(tiny_pair) -> None:
    profile = _recorded(tiny_pair, Settings(k=2))
    run = profile.run
    doc = chrome_trace([TracedRequest("run", run.rounds, run.summary, run.environment)])
    labels = next(e for e in doc["traceEvents"] if e["name"] == "process_labels")
    assert labels["args"]["labels"].endswith("target shape:tiny, draft shape:tiny-draft")
    request = next(e for e in doc["traceEvents"] if e["name"] == "request")
    assert request["args"]["models"]["target"].startswith("shape:tiny (shape, llama")
    assert request["args"]["model_identities"]["draft"]["shape"] == "tiny-draft"
    assert request["args"]["measured_by"] == "specdec-tui 0.1.0 at abc"
    old = dataclasses.replace(run.summary, models=None)  # a run recorded before identities
    doc = chrome_trace([TracedRequest("old", run.rounds, old)])
    request = next(e for e in doc["traceEvents"] if e["name"] == "request")
    assert request["args"]["models"] == {"target": "unknown", "draft": "unknown"}


# --------------------------------------------------------------------------- identities


def test_identity_round_trips_and_reads_unknown_keys_and_old_records() -> None:
    m = ModelIdentity("x.gguf", "gguf", "x", "llama", 135_000_000, 30, 4, 32,
                      (("4", 168), ("8", 1), ("dense", 2)), "ab" * 32)
    assert ModelIdentity.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    assert ModelIdentity.from_dict({**m.to_dict(), "added_later": 1}) == m
    assert m.quantization == "4-bit g32 + 8-bit x1 + dense x2"  # mixed bits summarised
    assert m.summary() == ("x.gguf (gguf, llama, 135M parameters, 30 layers, "
                           "4-bit g32 + 8-bit x1 + dense x2, sha256 abababababab)")
    summary = RunSummary.from_dict({**_summary_dict(), "models": {"target": m.to_dict(),
                                                                   "draft": None}})
    assert summary.models == {"target": m, "draft": None}
    assert RunSummary.from_dict(_summary_dict()).models is None


def _summary_dict() -> dict:
    return {"mode": "target-only", "tokens": 1, "rounds": 1, "prompt_tokens": 1,
            "prefill_tokens": 1, "proposed": 0, "accepted": 0, "acceptance": None,
            "per_position_acceptance": [], "mean_accepted_length": None, "e2e_s": 1.0,
            "ttft_s": 1.0, "decode_tok_s": 0.0, "phase_s": {}, "mean_tv": None,
            "traced": False, "stop_reason": "length"}


def test_self_drafts_name_the_target_they_derive_from(tiny_pair) -> None:
    pair = load_pair("shape:tiny,bits=8,seed=3", "self:layers=1")
    models = pair_identities(pair)
    target, draft = models["target"], models["draft"]
    assert (target.shape, target.seed, target.bits) == ("tiny", 3, 8)
    assert draft.kind == "self" and draft.base == "shape:tiny,bits=8,seed=3"
    assert draft.layers == 1 and draft.parameters == tiny_parameters(1)
    assert draft.origin == "derived from shape:tiny,bits=8,seed=3: shape tiny, seed 3"


def test_a_gguf_is_named_by_its_sha256_hashed_once_per_version(tmp_path, hash_cache) -> None:
    from tests.helpers.models import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "tiny.gguf", load_model("shape:tiny,dense"))
    loaded = load_model(str(path))
    want = hashlib.sha256(path.read_bytes()).hexdigest()
    m = identify(loaded)
    assert (m.kind, m.sha256, m.bits, m.architecture) == ("gguf", want, None, "llama")
    assert m.quantization == "dense" and m.parameters == tiny_parameters(2)
    # Kept beside the model cache, keyed by size and mtime: a later process reads it.
    stored = json.loads(hash_cache.read_text())[str(path.resolve())]
    assert stored["sha256"] == want and stored["size"] == path.stat().st_size
    stored["sha256"] = "f" * 64  # proves the next process reads the cache, not the file
    hash_cache.write_text(json.dumps({str(path.resolve()): stored}))
    I._HASHES.clear()
    assert I.file_sha256(path) == "f" * 64
    # A new version of the file (another mtime) is hashed again.
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert I.file_sha256(path) == want


def test_a_folder_is_named_by_its_weights_sha256(tmp_path, hash_cache) -> None:
    folder = save_mlx_folder(load_model("shape:tiny"), tmp_path / "tiny-mlx")
    m = identify(load_model(str(folder)))
    weights = (folder / "model.safetensors").read_bytes()
    assert m.kind == "folder" and m.sha256 == hashlib.sha256(weights).hexdigest()
    assert (m.bits, m.group_size, m.parameters) == (4, 64, tiny_parameters(2))
    # Several weight files: the digest of their sha256sum listing, sorted by name.
    (folder / "model-2.safetensors").write_bytes(b"more")
    listing = "".join(f"{hashlib.sha256(b).hexdigest()}  {n}\n" for n, b in
                      (("model-2.safetensors", b"more"), ("model.safetensors", weights)))
    assert I.folder_sha256(folder) == hashlib.sha256(listing.encode()).hexdigest()


def test_a_hub_blob_is_named_by_its_file_name(tmp_path, hash_cache) -> None:
    """Hugging Face's cache names each weights blob by its sha256: no hashing needed."""
    digest = "0123456789abcdef" * 4
    blob = tmp_path / "blobs" / digest
    blob.parent.mkdir()
    blob.write_bytes(b"not what it hashes to")
    snapshot = tmp_path / "snapshots" / ("c0ffee" * 6 + "abcd")
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").symlink_to(blob)
    assert I.folder_sha256(snapshot) == digest
    assert not hash_cache.exists()


@pytest.mark.real_model
def test_the_default_model_is_named_by_its_pinned_sha256(default_pair) -> None:
    from core.models.fetch import DEFAULT_GGUF_SHA256

    models = pair_identities(default_pair)
    target, draft = models["target"], models["draft"]
    assert (target.kind, target.sha256, target.architecture) == ("default", DEFAULT_GGUF_SHA256,
                                                                 "llama")
    assert target.layers == 30 and 134e6 < target.parameters < 136e6  # SmolLM2-135M
    assert draft.kind == "self" and draft.base == "default" and draft.sha256 == DEFAULT_GGUF_SHA256
    assert draft.bits == 4


# --------------------------------------------------------------------------- the tool


def test_a_named_commit_is_the_tools_where_git_cannot_tell(monkeypatch) -> None:
    """SPECDEC_TUI_COMMIT names the tree's commit where the tree's .git is not its history
    (the lent GPU's copy): the commit is the named one, its dirty flag unknown."""
    from core import version

    monkeypatch.setenv("SPECDEC_TUI_COMMIT", "abc123def4567890")
    assert version._git() == {"commit": "abc123def4567890", "dirty": None}
    assert version_text({"specdec_tui": "0.1.0", "specdec_tui_commit": "abc123def4567890",
                         "specdec_tui_dirty": None}) == "specdec-tui 0.1.0 at abc123def456"
    monkeypatch.setenv("SPECDEC_TUI_COMMIT", " ")
    assert version._git()["commit"] != " "  # blank: git's answer, as unset


def test_the_environment_names_the_tool_version_and_commit(monkeypatch) -> None:
    from core.profile import record_environment

    monkeypatch.delenv("SPECDEC_TUI_COMMIT", raising=False)
    tool_version.cache_clear()
    env = record_environment()
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert env["specdec_tui"] == project["version"]
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the commit is unknown by design (an installed wheel)")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert env["specdec_tui_commit"] == head and isinstance(env["specdec_tui_dirty"], bool)
    assert version_text(env).startswith(f"specdec-tui {project['version']} at {head[:12]}")
    assert version_text({"specdec_tui": "0.1.0", "specdec_tui_commit": None}) == "specdec-tui 0.1.0"


def test_profiles_diff_shows_both_runs_models(tmp_path, tiny_pair, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # room for both models' lines unwrapped
    store = ProfileStore(tmp_path)
    store.save(_recorded(tiny_pair, Settings(k=2), "a"))
    store.save(_recorded(load_pair("shape:tiny,seed=1", "shape:tiny-draft"), Settings(k=2), "b"))
    from core.cli import main

    assert main(["--profiles-dir", str(tmp_path), "profiles", "diff", "a", "b"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "shape tiny, seed 0" in out and "shape tiny, seed 1" in out
