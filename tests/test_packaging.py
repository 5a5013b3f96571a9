"""The wheel carries the presets and every module, and an installed copy finds them.

Built offline from a copy of the source (setuptools' own backend, no build isolation), then
installed into a folder and run from a folder with no profiles/, as `pipx install` or
`uv tool install` would leave it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO as ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in ("core", "tui", "profiles"):
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (whl,) = out.glob("*.whl")
    return whl


def test_the_wheel_carries_every_module_prompt_style_and_preset(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    want = {p.relative_to(ROOT).as_posix()
            for pattern in ("core/**/*.py", "tui/**/*.py", "core/prompts/*.txt", "tui/*.tcss")
            for p in ROOT.glob(pattern) if "__pycache__" not in p.parts}
    assert want - names == set()  # a package left out of pyproject's list shows here
    presets = {p.name for p in (ROOT / "profiles").glob("*.toml")}
    assert presets and {f"specdec_tui_presets/{n}" for n in presets} <= names


def test_an_installed_copy_lists_the_presets_and_saves_to_the_user_data_folder(
    wheel: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(site), str(wheel)], check=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"  # no profiles/ here
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("SPECDEC_TUI_PROFILES", "PYTHONPATH")}
    env.update(PYTHONPATH=str(site), XDG_DATA_HOME=str(tmp_path / "data"), COLUMNS="200")

    def run(code: str) -> str:
        proc = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    where = run("import core; print(core.__file__)")
    assert where.startswith(str(site)), where  # the installed copy, not this checkout
    listed = run("from core.cli import main; main(['profiles', 'list'])")
    for name in ("hybrid-cost-aware", "target-only", "fixed-8-tv1"):
        assert name in listed, listed
    saved = run(
        "from core.profile import Profile, ProfileStore\n"
        "from core.settings import Settings\n"
        "store = ProfileStore.default()\n"
        "store.save(Profile('mine', Settings()))\n"
        "print(store.toml_path('mine'))\n"
        "print(store.load('hybrid-cost-aware').settings.draft_source)\n"
    ).split()
    assert saved[0] == str(tmp_path / "data" / "specdec-tui" / "profiles" / "mine.toml")
    assert saved[1] == "hybrid"  # a preset loads by name from the installed copy


def test_building_says_nothing_about_the_licence(tmp_path: Path) -> None:
    """`make run` printed screens of setuptools deprecation warnings about the licence table
    (issue 29): the SPDX string builds without them."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    for folder in ("core", "tui", "profiles"):
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "out").mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", "from setuptools.build_meta import "
         "prepare_metadata_for_build_wheel as p; p('out')"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "licen" not in (proc.stdout + proc.stderr).lower(), proc.stderr[-2000:]


def test_building_the_wheel_warns_of_no_package_left_out(tmp_path: Path) -> None:
    """`make run` printed 40 lines of "Package 'core.prompts' is absent from the packages
    configuration": a data folder must be listed as a package of its own."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    for folder in ("core", "tui", "profiles"):
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "out").mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", "from setuptools.build_meta import build_wheel as b; b('out')"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = proc.stdout + proc.stderr
    assert "absent from" not in said, said[-2000:]
    names = set(zipfile.ZipFile(next((tmp_path / "out").glob("*.whl"))).namelist())
    assert {f"core/prompts/{p.name}" for p in (ROOT / "core/prompts").glob("*.txt")} <= names
