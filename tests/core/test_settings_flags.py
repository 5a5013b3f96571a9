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


# A value other than every command's default, per flag of FLAG_FIELDS (and --no-bonus).
WALKED = {"target": "shape:tiny", "draft": "shape:tiny-draft", "mode": "draft-only",
          "rule": "lossless", "tv": 0.5, "k": 8, "draft_source": "lookup",
          "policy": "heuristic", "temperature": 0.3, "top_p": 0.9, "repetition_penalty": 1.1,
          "dispatch": "gemv", "verify_attention": "plain", "step": "compiled", "seed": 7,
          "max_tokens": 9}


def _argv(dest: str, value: object) -> list[str]:
    flag = "--" + dest.replace("_", "-")
    return [flag] if value is True else [flag, str(value)]


@pytest.mark.parametrize("dest", [*FLAG_FIELDS, "no_bonus"])
def test_every_setting_flag_walks_through_chat_bench_sweep_and_the_app(dest) -> None:  # noqa: ANN001
    """One table, four commands: each setting flag is taken by the app, `chat`, `bench` and
    `sweep` (chat once had no --tv or --k), and lands on the same field (a grid axis, in the
    sweep). Given before the command it is the app's flag, and the command still reads it."""
    from core.bench.flags import settings_from_args
    from core.chat.cli import chat_settings
    from core.cli import build_parser
    from core.flags import command_settings
    from core.sweep.cli import grid_from_args

    assert set(WALKED) == set(FLAG_FIELDS)
    parser = build_parser()
    value = WALKED.get(dest, True)
    field = FLAG_FIELDS.get(dest, "bonus")
    want = False if dest == "no_bonus" else value
    flag = _argv(dest, value)
    app = command_settings(parser.parse_args(flag), first_run_settings())[1]
    assert getattr(app, field) == want and app != first_run_settings()
    for before in (False, True):  # `chat --tv 0.5 hi` and `--tv 0.5 chat hi`
        argv = [*flag, "chat", "hi"] if before else ["chat", "hi", *flag]
        assert getattr(chat_settings(parser.parse_args(argv)), field) == want, argv
        args = parser.parse_args([*flag, "bench"] if before else ["bench", *flag])
        if dest == "max_tokens":  # the bench's new tokens: its --tokens (core.cli.main maps
            assert (args.max_tokens if before else args.tokens) == value  # the app's onto it)
        elif dest in ("target", "draft"):  # put on every row once the pair is loaded
            assert getattr(args, dest) == value
        else:
            (row,) = settings_from_args(args)
            assert getattr(row.settings, field) == want, argv
        # the sweep's modes: the cells beside its baseline
        swept = _argv(dest, "speculative") if dest == "mode" else flag
        args = parser.parse_args([*swept, "sweep"] if before else ["sweep", *swept])
        grid = grid_from_args(args)
        axes = {"tv": grid.tvs, "k": grid.policies, "policy": grid.policies,
                "draft_source": grid.sources, "temperature": grid.temperatures}
        if dest in axes:
            expect = f"fixed-{value}" if dest == "k" else value
            assert axes[dest] == (expect,), (dest, axes[dest])
        elif dest == "mode":  # speculative alone: no draft-only row
            assert not grid.draft_only
        elif dest == "max_tokens":
            assert (args.max_tokens if before else args.tokens) == value
        else:
            assert getattr(grid.base, field) == want, argv


def test_chat_takes_the_tv_k_and_profile_forms_the_bench_takes() -> None:
    from core.chat.cli import chat_settings
    from core.cli import build_parser

    parser = build_parser()
    s = chat_settings(parser.parse_args(["chat", "--tv", "0.5", "--k", "8", "hi"]))
    assert (s.tv_budget, s.k, s.rule) == (0.5, 8, "mentored")
    s = chat_settings(parser.parse_args(["chat", "--profile", "fixed-4-tv1:tv_budget=0.5", "hi"]))
    assert (s.tv_budget, s.k, s.policy) == (0.5, 4, "fixed")
    s = chat_settings(parser.parse_args(["chat", "--temperature", "0.5", "--tv", "0.25", "hi"]))
    assert (s.rule, s.tv_budget) == ("mentored", 0.25)  # --tv keeps the mentored rule


def test_chat_help_shows_the_defaults_it_runs(capsys) -> None:  # noqa: ANN001
    from core.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["chat", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default hybrid)" in text and "default model" not in text
    assert "(default cost-aware)" in text and "NAME[:key=value,...]" in text


@pytest.mark.usefixtures("wide_console")
def test_a_setting_flag_before_a_command_that_reads_none_is_refused(capsys) -> None:  # noqa: ANN001
    from tests.helpers.cli_checks import refused

    refused(capsys, ["--tv", "0.5", "fetch"], "--tv does not apply to `fetch`")
    refused(capsys, ["--k", "3", "calibrate"], "--k does not apply to `calibrate`")


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
