"""Fault injection over every file the tool keeps, for `chat` (core/io/kept.py).

Each kept file `chat` reads (the default model's verified mark, the sha256 cache of a GGUF
target, the kept curve) is replaced in turn by a FIFO, a link to /dev/zero, a 200 MB sparse
file, its own JSON with every number NaN, then inf, then a string, and its first half. Each
time `chat` runs with private cache folders: it exits 0 or 2, within 20 s past the time the
same command takes with the file intact, says one sentence naming the file, rebuilds it, and
loses nothing a user made (a profile, a file in the working folder, the model). Then, in this
process, every number of each file alone as NaN or inf is refused by its reader, never used.

Where `chat` runs: as a user starts it (a subprocess) with the file intact and for the two
faults whose regression hangs or eats memory (the FIFO hung `chat`; /dev/zero was read until
memory ran out): there the process boundary is what is tested, a timeout bounds the hang and
the test process keeps its memory. The other five (sparse, NaN, inf, wrong type, truncated)
are about the reader's code, so they run `core.cli.main(["chat", ...])` in this process, timed
against an intact run in this process too, with its stderr captured. A fresh process is what
each of them would be: the process's memos of verdicts, hashes and sentences said
(core.models.fetch._VERIFIED, core.models.identify._HASHES, core.io.kept._SAID) start empty
for each run, and the environment and working folder are the subprocess's. A subprocess costs
a start (imports, the model's GGUF read and the self-draft's requantization: ~5 s of CPU for
the default pair) that none of these five reads a kept file in.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from core.io.kept import CACHE_ENV, CURVES_ENV
from core.profile.files import PROFILES_ENV
from tests.helpers import REPO, pairs
from tests.helpers.bench import without_default_system
from tests.helpers.kept_faults import FAULTS, number_paths, spoil, with_value

pytestmark = pytest.mark.real_model

SHARED_MODEL = Path.home() / ".cache" / "specdec-tui" / "SmolLM2-135M-Instruct.Q4_1.gguf"
SLACK_S = 20.0


# The faults whose regression hangs (a FIFO opened for reading waits for a writer) or reads
# without end (/dev/zero): run only in a subprocess, which a timeout ends.
IN_A_SUBPROCESS = ("fifo", "dev-zero")
assert set(IN_A_SUBPROCESS) < set(FAULTS)


class World:
    """Private kept folders, a user's profile and file, and the command that runs `chat`."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str]) -> None:
        self.monkeypatch, self.capsys = monkeypatch, capsys
        self.cache, self.curves = root / "cache", root / "curves"
        self.profiles, self.work = root / "profiles", root / "work"
        for d in (self.cache, self.curves, self.profiles, self.work):
            d.mkdir()
        (self.cache / SHARED_MODEL.name).symlink_to(SHARED_MODEL)  # read, never written
        (self.profiles / "mine.toml").write_text(
            'schema = 2\ndescription = "mine, by hand"\n[settings]\nk = 3\n')
        (self.work / "notes.txt").write_text("a user's file")
        self.made = self.user_files()

    def user_files(self) -> dict[str, bytes]:
        found = {str(p): p.read_bytes() for d in (self.profiles, self.work)
                 for p in sorted(d.iterdir())}
        found["model"] = hashlib.sha256(SHARED_MODEL.read_bytes()).digest()
        return found

    def chat(self, *argv: str, limit: float = 120.0) -> tuple[int, str, float]:
        env = {**os.environ, CACHE_ENV: str(self.cache), CURVES_ENV: str(self.curves),
               PROFILES_ENV: str(self.profiles), "PYTHONPATH": str(REPO), "COLUMNS": "300"}
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "core.cli", "chat", "Hi", "--max-tokens",
                               "2", *argv], cwd=self.work, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=limit, check=False)
        return proc.returncode, proc.stderr, time.perf_counter() - start

    def chat_here(self, *argv: str) -> tuple[int, str, float]:
        """The same command run by core.cli.main in this process, as a fresh process runs it:
        the subprocess's environment and working folder, and the memos a process keeps of what
        it verified, hashed and said emptied first."""
        from core.cli import main
        from core.io import kept
        from core.models import fetch, identify

        mp = self.monkeypatch
        for name, value in ((CACHE_ENV, self.cache), (CURVES_ENV, self.curves),
                            (PROFILES_ENV, self.profiles), ("COLUMNS", "300")):
            mp.setenv(name, str(value))
        mp.chdir(self.work)
        mp.setattr(fetch, "_VERIFIED", {})
        mp.setattr(identify, "_HASHES", {})
        mp.setattr(kept, "_SAID", set())
        self.capsys.readouterr()
        start = time.perf_counter()
        rc = main(["chat", "Hi", "--max-tokens", "2", *argv])
        took = time.perf_counter() - start
        return rc, self.capsys.readouterr().err, took


def check_faults(world: World, kept: Path, argv: tuple[str, ...], rebuilt: Any) -> None:
    """Run `chat` once intact in a subprocess and once in this process (their times are the
    baselines), then once per fault: in a subprocess for IN_A_SUBPROCESS, else here."""
    rc, err, base = world.chat(*argv)
    assert rc == 0 and kept.is_file(), err
    good = kept.read_text()
    rc, err, here = world.chat_here(*argv)
    assert rc == 0 and kept.read_text() == good, err
    for fault in FAULTS:
        spoil(kept, fault, good)
        if fault in IN_A_SUBPROCESS:
            rc, err, took = world.chat(*argv, limit=base + SLACK_S + 30)
            bound = base
        else:
            rc, err, took = world.chat_here(*argv)
            bound = here
        assert rc in (0, 2), (fault, err)
        assert took < bound + SLACK_S, (fault, took, bound)
        assert "Traceback" not in err, (fault, err)
        said = [line for line in err.splitlines() if str(kept) in " ".join(line.split())]
        assert len(said) == 1 and "set aside" in said[0], (fault, err)
        assert kept.is_file() and not kept.is_symlink(), fault
        assert rebuilt(json.loads(kept.read_text())), (fault, kept.read_text()[:300])
        assert world.user_files() == world.made, fault


@pytest.fixture
def world(tmp_path, monkeypatch, capsys) -> World:
    if not SHARED_MODEL.is_file():
        pytest.skip("the default model is not fetched (specdec-tui fetch)")
    return World(tmp_path, monkeypatch, capsys)


def test_chat_survives_every_fault_in_the_default_models_verified_mark(
    world, default_pair, monkeypatch
) -> None:
    """In this process the pair is the session's (tests/helpers/pairs.py), through a load_pair
    that first calls fetch_default as core.models.loader.load_model does for "default": that
    call reads the mark (and hashes the model again when the mark is refused); the GGUF read
    and the requantization it skips read no kept file, and the subprocess runs do them. The
    pair's chat template is used without its default system message here
    (tests.helpers.bench.without_default_system): 11 prompt tokens to prefill, not 32."""
    import core.models
    from core.models import fetch
    from core.models.fetch import DEFAULT_GGUF_SHA256, VERDICT_SUFFIX

    shared = core.models.load_pair

    def load_pair(target: str, draft: str | None, **kw: Any) -> Any:
        if (target, draft) == pairs.default_spec():
            fetch.fetch_default(progress=kw.get("progress", False))
        return shared(target, draft, **kw)

    monkeypatch.setattr(core.models, "load_pair", load_pair)
    without_default_system(default_pair, monkeypatch)
    mark = world.cache / (SHARED_MODEL.name + VERDICT_SUFFIX)
    check_faults(world, mark, ("--mode", "target-only"),
                 lambda d: d.get("sha256") == DEFAULT_GGUF_SHA256)


def test_chat_survives_every_fault_in_the_sha256_cache(world, tmp_path) -> None:
    from core import models as M
    from core.models.identify import HASH_CACHE_NAME
    from tests.helpers.models import write_tiny_gguf

    gguf = write_tiny_gguf(tmp_path / "tiny.gguf", M.load_model("shape:tiny,dense"))
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    kept = world.cache / HASH_CACHE_NAME
    check_faults(world, kept, ("--target", str(gguf), "--draft", "shape:tiny-draft",
                               "--mode", "target-only"),
                 lambda d: d.get(str(gguf.resolve()), {}).get("sha256") == digest)


def test_chat_survives_every_fault_in_a_kept_curve(world) -> None:
    def good_curve(doc: dict) -> bool:
        from core.dispatch.curve import VerifyCostCurve

        VerifyCostCurve.from_dict(doc["curve"])
        return math.isfinite(doc["measured_at"])

    argv = ("--target", "shape:tiny", "--draft", "shape:tiny-draft")  # cost-aware: a curve
    rc, err, _ = world.chat(*argv)
    assert rc == 0, err
    (kept,) = world.curves.iterdir()
    check_faults(world, kept, argv, good_curve)


# --------------------------------------------------------------------------- every number


def test_every_number_of_every_kept_file_alone_as_nan_or_inf_is_refused(tmp_path,
                                                                          monkeypatch) -> None:
    """In this process: each number of a kept curve, a verified mark and a sha256 cache set
    to NaN or inf on its own; each reader refuses the file, or reads nothing of that number
    (a field the curve derives again), never uses it."""
    from core.dispatch import curve_cache
    from core.dispatch.curve import VerifyCostCurve
    from core.io.kept import read_kept
    from core.models import fetch, identify
    from core.settings import Settings

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    curve = VerifyCostCurve("cpu", "cpu", 16, {"auto": {r: 1e-3 * r for r in range(1, 10)}},
                            draft_step_s=2e-4, draft_step_sampled_s=3e-4,
                            accept_s={"auto": {2: 1e-5}}, predicted_boundary=4, repeats=3,
                            context_end=20, calls=9)
    key = {"target": {"sha256": "ab" * 32, "parameters": 135, "bits": 4}, "draft": None,
           "modes": ["auto"]}
    settings = Settings(policy="cost-aware", k_max=8)
    path = curve_cache.save_curve(key, curve, tmp_path)
    doc = json.loads(path.read_text())
    assert curve_cache.load_curve(key, settings, tmp_path).kept is not None
    paths = number_paths(doc)
    assert len(paths) > 20
    intact = (curve.to_dict(), doc["measured_at"])
    for at in paths:
        for bad in (math.nan, math.inf):
            path.write_text(json.dumps(with_value(doc, at, bad)))
            found = curve_cache.load_curve(key, settings, tmp_path).kept
            # refused, or a number the reader never reads (one to_dict derives): nothing used
            assert found is None or (found.curve.to_dict(), found.measured_at) == intact, at
    stamp = {"size": 10, "mtime_ns": 20, "sha256": "ab" * 32}
    cache = {"/m.gguf": dict(stamp)}
    for check, good in ((fetch._check_stamp, stamp), (identify._check_cache, cache)):
        assert check(good) == good
        kept = tmp_path / "k.json"
        for at in number_paths(good):
            for bad in (math.nan, math.inf, -1, 1.5):
                kept.write_text(json.dumps(with_value(good, at, bad)))
                assert read_kept(kept, "kept file", check) is None, (at, bad)
