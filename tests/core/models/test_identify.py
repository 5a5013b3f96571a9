"""File digests (core/models/identify.py): the sha256 cache is a kept file, read bounded and
checked; a bad one is set aside and rebuilt, never a hang, never a wrong digest."""

from __future__ import annotations

import hashlib
import json

import pytest

from core.io.kept import CACHE_ENV
from core.models import identify as I
from tests.helpers.kept_faults import UNREADABLE, plant_unreadable


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse", "lie", "wrong-type"])
def test_a_hostile_sha256_cache_is_set_aside_and_rebuilt(tmp_path, monkeypatch, kind, caplog,
                                                         no_hang) -> None:
    """A FIFO at <cache>/sha256-cache.json hung `--target x.gguf`; an entry that says another
    digest for the file's size and mtime with the wrong type is not trusted either."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv(CACHE_ENV, str(cache))
    monkeypatch.setattr(I, "_HASHES", {})
    weights = tmp_path / "x.gguf"
    weights.write_bytes(b"weights" * 100)
    st = weights.stat()
    kept = cache / I.HASH_CACHE_NAME
    if kind in UNREADABLE:
        plant_unreadable(kept, kind)
    elif kind == "lie":  # a digest that is not one: refused, the file hashed
        kept.write_text(json.dumps({str(weights.resolve()): {
            "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": "../../etc"}}))
    else:
        kept.write_text(json.dumps({str(weights.resolve()): {
            "size": float(st.st_size), "mtime_ns": str(st.st_mtime_ns), "sha256": 7}}))
    with caplog.at_level("WARNING", logger="core"):
        digest = I.file_sha256(weights)
    assert digest == hashlib.sha256(weights.read_bytes()).hexdigest()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and str(kept) in said[0] and "rebuilt" in said[0], said
    assert kept.is_file() and not kept.is_symlink()
    assert json.loads(kept.read_text())[str(weights.resolve())]["sha256"] == digest
