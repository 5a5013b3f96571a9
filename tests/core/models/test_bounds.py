"""Model sizes bounded before anything is built (core/models/bounds.py): absurd shapes and
folders, weights that do not fit their config, each in one sentence (issue 32, rows 8 and 9)."""

from __future__ import annotations

import time

import pytest

from core import models as M
from tests.helpers.models import edited_copy, one_sentence


@pytest.mark.usefixtures("wide_console")
@pytest.mark.parametrize(
    "spec, words",
    [
        ("shape:tiny,layers=100000", "num_hidden_layers = 100,000"),
        ("shape:tiny,vocab=100000000000", "vocab_size = 100,000,000,000"),
    ],
)
def test_a_shape_of_absurd_size_is_refused_before_it_is_built(spec, words) -> None:
    t0 = time.monotonic()
    with pytest.raises(M.ModelLoadError) as exc:
        M.load_model(spec)
    assert words in one_sentence(exc.value)
    assert time.monotonic() - t0 < 5


@pytest.mark.usefixtures("wide_console")
def test_a_folder_declaring_absurd_sizes_is_refused_before_mlx_lm_builds_it(
    tiny_folder, tmp_path
) -> None:
    folder = edited_copy(tiny_folder, tmp_path / "many", num_hidden_layers=100000)
    t0 = time.monotonic()
    with pytest.raises(M.ModelLoadError) as exc:
        M.load_model(str(folder))
    assert "num_hidden_layers = 100,000 (layers)" in one_sentence(exc.value)
    assert time.monotonic() - t0 < 5
    folder = edited_copy(tiny_folder, tmp_path / "wide", vocab_size="lots")
    with pytest.raises(M.ModelLoadError, match="must be a whole number"):
        M.load_model(str(folder))


@pytest.mark.usefixtures("wide_console")
def test_a_folder_whose_weights_do_not_fit_its_config_says_why(tiny_folder, tmp_path) -> None:
    few = edited_copy(tiny_folder, tmp_path / "few", num_hidden_layers=1)
    with pytest.raises(M.ModelLoadError) as exc:
        M.load_model(str(few))
    msg = one_sentence(exc.value)
    assert "declares 1 layers but its weights hold 2" in msg, msg
    assert "parameters not in model" not in msg
    wide = edited_copy(tiny_folder, tmp_path / "wide", intermediate_size=256)
    with pytest.raises(M.ModelLoadError) as exc:
        M.load_model(str(wide))
    msg = one_sentence(exc.value)
    assert "its tensor model.layers.0.mlp." in msg and "config.json's sizes make it" in msg, msg
    assert "bits 0" not in msg
