"""docs/benchmarks/h200/never_slower.py's PART: the calls' parts cover every bench once."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def _module():
    return load_script("docs/benchmarks/h200/never_slower.py", "never_slower")


def _part_of():
    return _module().part_of


def test_parts_cover_every_bench_once_in_order() -> None:
    part_of = _part_of()
    benches = [(f"p{i}", t) for i in range(9) for t in ("0.0", "0.7")]
    for n in (2, 3, 4):
        parts = [part_of(benches, f"{i}/{n}") for i in range(1, n + 1)]
        assert [b for p in parts for b in p] == benches
        assert max(map(len, parts)) - min(map(len, parts)) <= n
    assert part_of(benches, "1") + part_of(benches, "2") == benches
    assert part_of(benches, "1") == part_of(benches, "1/2")
    assert part_of(benches, "") == benches
    assert part_of(benches, "4/3") == benches  # not a part: every bench


def test_the_default_row_is_the_apps_default() -> None:
    """The bench's default row, read as the bench reads a --profile with overrides, is
    first_run_settings() in every field the call's flags do not set (run 3's row was typed by
    hand; a default that changed would have left the bench measuring the old one)."""
    import dataclasses

    from core.flags import parse_profile_spec as _parse_overrides
    from core.profile import load_profile
    from core.settings import first_run_settings

    mod = _module()
    name, extra = _parse_overrides(mod.ROWS[1])
    got = load_profile(name).settings.replace(**extra)
    want = first_run_settings()
    for f in dataclasses.fields(want):
        if f.name not in mod.FLAGGED:
            assert getattr(got, f.name) == getattr(want, f.name), f.name
    assert mod.ROWS[1].startswith("target-only:mode=speculative,draft_source=hybrid")


def test_drop_leaves_rows_out_but_never_the_baseline(monkeypatch) -> None:
    """DROP names rows left out of every bench; target-only, every ratio's baseline, stays."""
    mod = _module()
    extra = mod.flipped("lookup_min_match=3")
    monkeypatch.delenv("DROP", raising=False)
    assert mod.rows(extra) == mod.ROWS + extra
    monkeypatch.setenv("DROP", "hybrid-cost-aware cost-aware target-only")
    got = mod.rows(extra)
    assert "hybrid-cost-aware" not in got and "cost-aware" not in got
    assert got[0] == "target-only" and got[-2:] == extra
    assert len(got) == len(mod.ROWS) + len(extra) - 2


def test_an_ab_s_rows_are_the_default_and_the_lookup_with_the_setting() -> None:
    """An A/B's rows (`flipped`) read back as the app's default and the lookup preset with the
    one setting flipped, and nothing else changed. No switch is under an A/B now (AB_ROWS is
    empty: docs/decisions/ holds the five that ran); every one it names must still exist."""
    from core.flags import parse_profile_spec as _parse_overrides
    from core.profile import load_profile
    from core.settings import first_run_settings

    mod = _module()
    assert all(callable(rows) for rows in mod.AB_ROWS.values())
    setting, value = "lookup_min_match", 3
    default, lookup = mod.flipped(f"{setting}={value}")
    name, extra = _parse_overrides(default)
    got = load_profile(name).settings.replace(**extra)
    want = first_run_settings().replace(**{setting: value})
    for f in ("draft_source", "policy", "k_max", setting):
        assert getattr(got, f) == getattr(want, f), f
    name, extra = _parse_overrides(lookup)
    assert name == "lookup" and extra == {setting: value}
