"""Settings read from the command line in one place (core.settings.flag_changes, with_flags):
bench, chat and the app read a flag as the same field, and an out-of-range value names its
flag; and the longest proposal a setting can draft, counted one way (Settings.longest_proposal)."""

from __future__ import annotations

import argparse

import pytest

from core.settings import (
    FLAG_FIELDS,
    Settings,
    SettingsError,
    field_names,
    first_run_settings,
    flag_changes,
    with_flags,
)


def test_every_flag_sets_a_declared_field() -> None:
    assert set(FLAG_FIELDS.values()) <= set(field_names())


def test_flags_left_out_set_nothing_and_no_bonus_sets_bonus_false() -> None:
    args = argparse.Namespace(tv=0.5, k=None, target="", draft="shape:tiny", no_bonus=True)
    assert flag_changes(args) == {"tv_budget": 0.5, "draft": "shape:tiny", "bonus": False}
    assert flag_changes(args, skip=("draft", "bonus")) == {"tv_budget": 0.5}
    assert flag_changes(argparse.Namespace()) == {}


def test_an_out_of_range_flag_is_named_in_its_sentence() -> None:
    with pytest.raises(SettingsError, match=r"^--tv: tv_budget must be between 0 and 1"):
        with_flags(Settings(), {"tv_budget": 2.0})
    with pytest.raises(SettingsError, match=r"^--k: k \(12\) must not exceed k_max \(8\)"):
        with_flags(Settings(k_max=8), {"k": 12})
    with pytest.raises(SettingsError, match=r"^--max-tokens: max_tokens must be between"):
        with_flags(Settings(), {"max_tokens": 0})
    # a field that no flag sets (k_min: a profile's override) keeps its own sentence
    with pytest.raises(SettingsError, match=r"^k_min \(5\) must not exceed k_max \(4\)"):
        with_flags(Settings(), {"k_max": 4, "k_min": 5, "k": 4})
    assert with_flags(Settings(), {"k": 2}) == Settings(k=2)


def test_chat_bench_and_the_app_read_the_same_flags_alike() -> None:
    from core.bench.flags import settings_from_args
    from core.chat.cli import chat_settings
    from core.cli import build_parser

    parser = build_parser()
    common = ["--mode", "draft-only", "--draft-source", "lookup", "--temperature", "0"]
    chat = chat_settings(parser.parse_args(["chat", "hi", *common]))
    bench = settings_from_args(parser.parse_args(["bench", *common])).pop().settings
    for name in ("mode", "draft_source", "temperature"):
        assert getattr(chat, name) == getattr(bench, name), name
    # the app's only settings flags are the models; on the first run's settings
    app_args = parser.parse_args(["--target", "shape:tiny", "--draft", "shape:tiny-draft"])
    app = with_flags(first_run_settings(), flag_changes(app_args))
    assert (app.target, app.draft) == ("shape:tiny", "shape:tiny-draft")
    assert app.replace(target="default", draft="self:bits=4") == first_run_settings()


def test_chat_names_the_flag_it_refuses() -> None:
    from core.chat.cli import chat_settings
    from core.cli import build_parser

    args = build_parser().parse_args(["chat", "hi", "--max-tokens", "0"])
    with pytest.raises(SettingsError, match=r"^--max-tokens: max_tokens must be between 1"):
        chat_settings(args)


def test_the_longest_proposal_is_counted_one_way() -> None:
    """k under a fixed policy, k_max otherwise: what the bench's calibration covers (+1 row)."""
    from core.bench.predicted import needed_calibration
    from core.bench.results import BenchSetting

    fixed, adaptive = Settings(policy="fixed", k=3), Settings(policy="heuristic", k=2, k_max=10)
    assert (fixed.longest_proposal, adaptive.longest_proposal) == (3, 10)
    need = needed_calibration([BenchSetting("a", fixed), BenchSetting("b", adaptive)])
    assert need is not None and need["rows"] == 11
    assert needed_calibration([BenchSetting("t", Settings(mode="target-only"))]) is None
