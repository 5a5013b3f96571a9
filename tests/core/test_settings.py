"""Settings as users give them (core/settings.py): overrides, types, bounds and seeds, each refused
in one sentence naming the setting, before any model loads (issues 24 and 32, folded in from
the hostile-input modules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.settings import MAX_PREFILL_CHUNK, Settings, SettingsError
from tests.helpers.cli_checks import QUICK, TINY, refused
from tests.helpers.models import one_sentence


@pytest.mark.usefixtures("wide_console")
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
            "--profile target-only:seed=-1:", "seed must be between")
    # the last of --seeds seeds must fit too
    refused(capsys, ["bench", "--seed", str(MAX_SEED - 1), *QUICK[:-4], *TINY, "--seeds", "3"],
            "goes past the largest seed")
    (tmp_path / "neg.toml").write_text("schema = 2\n[settings]\nseed = -5\n")
    refused(capsys, ["--profile", str(tmp_path / "neg.toml"), "chat", "hi", *TINY],
            "neg.toml", "seed must be between")
    assert no_load == []


@pytest.mark.usefixtures("wide_console")
def test_a_key_given_twice_in_a_profile_spec_is_refused(capsys, no_load) -> None:
    refused(capsys, ["bench", "--profile", "fixed-8-tv1:k=2,k=3", *QUICK], "sets k twice")


@pytest.mark.usefixtures("wide_console")
@pytest.mark.parametrize("key", ["greedy", "replace", "effective_rule", "__doc__", "to_dict"])
def test_an_override_of_an_undeclared_name_is_refused(key, capsys, no_load) -> None:  # noqa: F811
    spec = f"fixed-4-tv1:{key}=true"
    refused(capsys, ["bench", "--profile", spec, *QUICK], f"--profile {spec}",
            "is not a known key=value setting")
    with pytest.raises(SettingsError) as exc:
        Settings().replace(**{key: True})
    assert f"Unknown setting(s): {key}" in one_sentence(exc.value)
    assert no_load == []


@pytest.mark.usefixtures("wide_console")
def test_a_setting_of_the_wrong_type_is_a_sentence_not_a_type_error() -> None:
    for bad in ({"k": "3"}, {"k": True}, {"tv_budget": "1"}, {"mode": 3}, {"bonus": 1}):
        with pytest.raises(SettingsError) as exc:
            Settings(**bad)
        (name,) = bad
        assert f"Setting {name} must be" in one_sentence(exc.value)
    assert Settings(tv_budget=1).tv_budget == 1  # an int still stands for a float


@pytest.mark.usefixtures("wide_console")
def test_an_override_value_may_hold_commas() -> None:
    from core.flags import parse_profile_spec as _parse_overrides

    name, out = _parse_overrides("fixed-4-tv1:draft=shape:tiny-draft,layers=1,k=2")
    assert name == "fixed-4-tv1"
    assert out == {"draft": "shape:tiny-draft,layers=1", "k": 2}
    _, out = _parse_overrides("fixed-4-tv1:target=shape:tiny,dense,seed=3")
    assert out == {"target": "shape:tiny,dense", "seed": 3}  # seed is a setting
    _, out = _parse_overrides('fixed-4-tv1:target="shape:tiny,dense,seed=3", k=2')
    assert out == {"target": "shape:tiny,dense,seed=3", "k": 2}  # quoted: taken whole
    # a piece after a number is no part of it: still a sentence, not a silent string
    with pytest.raises(SettingsError, match="'layers=1' is not a known key=value setting"):
        _parse_overrides("fixed-4-tv1:k=2,layers=1")


@pytest.mark.usefixtures("wide_console")
@pytest.mark.parametrize("field", ["prefill_chunk", "repetition_context", "max_tokens"])
def test_every_integer_setting_has_an_upper_bound(field, capsys, no_load) -> None:  # noqa: F811
    with pytest.raises(SettingsError) as exc:
        Settings(**{field: 2**31})
    assert f"{field} must be between 1 and" in one_sentence(exc.value)
    spec = f"target-only:{field}={2**31}"
    refused(capsys, ["bench", "--profile", spec, *QUICK], f"{field} must be between")
    assert Settings(prefill_chunk=MAX_PREFILL_CHUNK).prefill_chunk == MAX_PREFILL_CHUNK
    assert no_load == []


@pytest.mark.usefixtures("wide_console")
def test_a_fixed_k_above_k_max_is_refused(capsys, no_load) -> None:  # noqa: F811
    with pytest.raises(SettingsError) as exc:
        Settings(policy="fixed", k=12, k_max=8)
    assert "k (12) must not exceed k_max (8)" in one_sentence(exc.value)
    refused(capsys, ["bench", "--profile", "fixed-8-tv1", "--k", "12", *QUICK],
            "--k:", "must not exceed k_max (8)")
    assert Settings(k=12, k_max=12).k == 12
    refused(capsys, ["bench", "--profile", "fixed-8-tv1:k=12", *QUICK], "must not exceed k_max")
    assert no_load == []
    # a file written before the bound: the fixed policy drafted k, so k_max is read as k
    old = Settings.from_dict({"policy": "fixed", "k": 12, "k_max": 8})
    assert (old.k, old.k_max) == (12, 12)


@pytest.mark.usefixtures("wide_console")
def test_type_errors_say_an_integer_not_a_int() -> None:
    from core.settings import Settings, SettingsError

    with pytest.raises(SettingsError) as exc:
        Settings.from_dict({"k": "3"})
    assert "must be an integer" in one_sentence(exc.value)
    with pytest.raises(SettingsError, match="must be a number"):
        Settings.from_dict({"tv_budget": "x"})
    from core.errors import UserError
    from core.flags import parse_profile_spec as _parse_overrides

    with pytest.raises(UserError, match="k must be an integer"):
        _parse_overrides("fixed-8-tv1:k=abc")


def test_a_retired_switch_loads_at_the_value_that_stayed_and_is_refused_otherwise() -> None:
    """A profile or record written while a decided switch existed (core/settings.py RETIRED)
    loads where it holds the behaviour that stayed; any other value, or setting it now, is a
    sentence naming the decision record, not a silent run of something else."""
    from core.settings import RETIRED

    for name, (stayed, record) in RETIRED.items():
        assert (Path(__file__).parents[2] / record).is_file(), record
        assert Settings.from_dict({name: stayed, "k": 3}) == Settings(k=3)
        if isinstance(stayed, bool):
            other = not stayed
        else:
            other = f"not-{stayed}" if isinstance(stayed, str) else stayed + 1
        with pytest.raises(SettingsError) as loaded:
            Settings.from_dict({name: other})
        with pytest.raises(SettingsError) as replaced:
            Settings().replace(**{name: stayed})
        for exc in (loaded, replaced):
            assert f"{name} was removed after its A/B ({record})" in one_sentence(exc.value)
    with pytest.raises(SettingsError, match="Unknown setting"):  # the control: not retired
        Settings.from_dict({"overlap_rounds": False})
