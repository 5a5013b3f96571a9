"""Issue 32, row 16: mode, rule or policy changed mid-turn, then ctrl+s. The saved run records
the settings its first round ran with and, from the round where they changed, what changed:
never the settings at the end as if they had produced every round."""

from __future__ import annotations

from textual.widgets import Input

from core.profile import ProfileStore
from tests.helpers.app import ready, wait_for
from tests.helpers.app_turns import send_until
from tui.screens.save_profile import SaveProfileScreen
from tui.widgets.composer import Composer

SIZE = (160, 48)


async def test_a_mode_changed_mid_turn_is_recorded_from_the_round_it_applied(
    make_app, script, profiles, capsys, monkeypatch  # noqa: ANN001
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    script.rounds, script.delay_s = 60, 0.1
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "go on", lambda: len(app.runs_state.stats.rounds) >= 3)
        app.query_one("#prompt", Composer).blur()
        await pilot.press("m", "a")  # mode speculative -> target-only; rule mentored -> greedy
        await wait_for(pilot, lambda: app.run_id is None)
        assert app.settings.mode == "target-only"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, SaveProfileScreen))
        app.screen.query_one(Input).value = "mixed"
        await pilot.press("enter")
        await wait_for(pilot, lambda: (profiles / "mixed.run.json").is_file())
    run = ProfileStore(profiles).load("mixed").run
    assert run is not None and run.settings is not None
    assert run.settings.mode == "speculative"  # what the first round ran with
    assert run.settings_changes, "the change mid-turn was not recorded"
    changed = {k for _, c in run.settings_changes for k in c}
    assert {"mode", "rule"} <= changed
    for i, ev in enumerate(run.rounds):  # each round's recorded mode is the one it ran in
        target_only = all(t.origin == "target" for t in ev.tokens)
        assert (run.settings_of_round(i).mode == "target-only") == target_only, i
    assert any(all(t.origin == "target" for t in ev.tokens) for ev in run.rounds)
    assert any(ev.proposed for ev in run.rounds)
    from core import cli

    assert cli.main(["profiles", "show", "mixed", "--profiles-dir", str(profiles)]) == 0
    at = run.settings_changes[0][0]
    assert f"settings from round {at}" in " ".join(capsys.readouterr().out.split())


async def test_k_up_past_k_max_takes_k_max_with_it(make_app) -> None:  # noqa: ANN001
    from core.settings import MAX_K, Settings

    app = make_app(Settings(k=8, k_max=8))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("f6")  # k + 1 while typing
        assert (app.settings.k, app.settings.k_max) == (9, 9)
        app.apply(k=MAX_K, k_max=MAX_K)
        await pilot.press("f6")  # past MAX_K: refused, nothing changes
        assert (app.settings.k, app.settings.k_max) == (MAX_K, MAX_K)
        await pilot.press("f5")
        assert (app.settings.k, app.settings.k_max) == (MAX_K - 1, MAX_K)


import pytest  # noqa: E402


@pytest.mark.parametrize(("first", "then"), [("speculative", "target-only"),
                                             ("target-only", "speculative")])
def test_the_real_engine_tells_the_watch_which_round_took_the_change(first, then) -> None:
    """On the real loop, where a pipelined target step reads the settings ahead of its round:
    the recorded change starts at the first round that ran in the new mode."""
    from core.decode.engine import Engine
    from core.events import RoundEvent
    from core.models import load_pair
    from core.settings import Settings
    from tui.settings_watch import SettingsWatch

    engine = Engine.from_pair(load_pair("shape:tiny", "shape:tiny-draft"))
    s = Settings(mode=first, temperature=0.0, k=3, max_tokens=40, ignore_eos=True, traced=False)
    current = [s]
    watch = SettingsWatch(lambda: current[0])
    rounds = []
    for item in engine.generate(list(range(5, 25)), s, settings_source=watch):
        if isinstance(item, RoundEvent):
            rounds.append(item)
            watch.rounds += 1
            if len(rounds) == 4:
                current[0] = s.replace(mode=then)
    assert watch.first == s
    ((at, changed),) = watch.changes
    assert changed == {"mode": then}
    spec = [ev.source != "" for ev in rounds]  # a drafting source, or none: a target step
    if then == "speculative":  # target steps up to the change, a draft from its round on
        assert not any(spec[:at]) and spec[at], (at, spec)  # (the last may be a plain step)
    else:
        assert all(spec[:at]) and not any(spec[at:]), (at, spec)
