"""tools/device/pack.sh packs what the CLI needs on a fresh GPU machine.

The lent machines have no package index, so every dependency the CLI imports is either a
wheel pack.sh carries or a package their image already has. When `gguf` became an import of
the CLI's start (core/models/gguf_header.py) and pack.sh was not told, the set-up calls broke
with a ModuleNotFoundError (issue 31). These tests parse pack.sh's lists and pyproject.toml's
[project] dependencies and fail when the two disagree: a dependency in no list, a pin that
differs, a packed wheel whose own requirements are neither packed nor on the machine, and a
package said to be the app's alone that core/ imports. They also check that every benchmark
script restores a carried kernel cache, except the one that measures a machine without one.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers import REPO as ROOT

DEVICE_TOOLS = ROOT / "tools" / "device"
# the GPU benchmarks, current and archived, whose scripts restore the carried kernel cache
BENCH_SCRIPTS = (ROOT / "docs" / "benchmarks" / "h200", ROOT / "docs" / "benchmarks" / "archive" / "h200")
# The device: Linux, x86-64, CPython 3.12 (pack.sh downloads for it).
DEVICE = {**default_environment(), "sys_platform": "linux", "platform_system": "Linux",
          "python_version": "3.12", "python_full_version": "3.12.3",
          "platform_machine": "x86_64", "implementation_name": "cpython"}


def pack_lists(text: str | None = None) -> dict[str, list[str]]:
    """pack.sh's `PACK=(...)`, `MACHINE=(...)`, `APP_ONLY=(...)` and `CUDA_PACK=...` lines."""
    text = (DEVICE_TOOLS / "pack.sh").read_text() if text is None else text
    out: dict[str, list[str]] = {}
    for name in ("PACK", "MACHINE", "APP_ONLY"):
        m = re.search(rf"^{name}=\((.*)\)$", text, flags=re.M)
        assert m, f"pack.sh has no one-line {name}=(...) array"
        out[name] = shlex.split(m[1])
    m = re.search(r"^CUDA_PACK=(.*)$", text, flags=re.M)
    assert m, "pack.sh has no CUDA_PACK=... line"
    out["CUDA_PACK"] = shlex.split(m[1])
    return out


def device_requirements(reqs: list[str], extra: str = "") -> list[Requirement]:
    """The requirements that apply on the device (markers evaluated there)."""
    out = []
    for text in reqs:
        r = Requirement(text)
        if r.marker is None or r.marker.evaluate({**DEVICE, "extra": extra}):
            out.append(r)
    return out


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def disagreements(lists: dict[str, list[str]], deps: list[str], cuda: list[str]) -> list[str]:
    """Every way pack.sh's lists and pyproject's dependencies disagree, one sentence each."""
    problems = []
    packed = {canonicalize_name(Requirement(p).name): Requirement(p) for p in lists["PACK"]}
    machine = {canonicalize_name(n) for n in lists["MACHINE"]}
    app = {canonicalize_name(n) for n in lists["APP_ONLY"]}
    wanted = {canonicalize_name(r.name): r for r in device_requirements(deps)}
    for name, req in wanted.items():
        where = [label for label, names in (("PACK", packed), ("MACHINE", machine),
                                            ("APP_ONLY", app)) if name in names]
        if len(where) != 1:
            problems.append(f"{name} is in {where or 'no list'} of pack.sh (exactly one wanted)")
        elif name in packed and packed[name].specifier != req.specifier:
            problems.append(f"pack.sh packs {packed[name]}, pyproject wants {req.name}{req.specifier}")
    for name in packed.keys() - wanted.keys():
        problems.append(f"pack.sh packs {name}, which pyproject.toml does not name")
    # The CUDA backend replaces the CPU one: the same MLX version as the `cuda` extra's.
    cuda_pins = {str(r.specifier) for r in device_requirements(cuda)}
    (cuda_pack,) = lists["CUDA_PACK"]
    if {str(Requirement(cuda_pack).specifier)} != cuda_pins:
        problems.append(f"pack.sh's {cuda_pack} is not the `cuda` extra's {sorted(cuda_pins)}")
    return problems


def test_pack_sh_and_pyproject_agree() -> None:
    p = project()
    assert disagreements(pack_lists(), p["dependencies"],
                         p["optional-dependencies"]["cuda"]) == []


def test_the_comparison_sees_a_dependency_pack_sh_was_not_told_of() -> None:
    """What issue 31 found: gguf in pyproject, not in pack.sh; and a pin that drifted."""
    p = project()
    lists = pack_lists()
    lists["PACK"] = [x for x in lists["PACK"] if not x.startswith("gguf")]
    problems = disagreements(lists, p["dependencies"], p["optional-dependencies"]["cuda"])
    assert problems == ["gguf is in no list of pack.sh (exactly one wanted)"]
    lists = pack_lists()
    lists["PACK"] = [re.sub(r"^mlx-lm==.*", "mlx-lm==0.31.0", x) for x in lists["PACK"]]
    lists["CUDA_PACK"] = ["mlx-cuda-13==0.31.0"]
    problems = disagreements(lists, p["dependencies"], p["optional-dependencies"]["cuda"])
    assert len(problems) == 2 and "mlx-lm==0.31.0" in problems[0] and "cuda" in problems[1]


def test_every_requirement_of_a_packed_wheel_is_packed_or_on_the_machine() -> None:
    """The wheels are unpacked with --no-deps: what they require must already be there."""
    lists = pack_lists()
    have = {canonicalize_name(Requirement(p).name) for p in lists["PACK"]}
    have |= {canonicalize_name(n) for n in lists["MACHINE"]}
    missing = []
    for spec in lists["PACK"]:
        name = Requirement(spec).name
        for r in device_requirements(md.requires(name) or []):
            if canonicalize_name(r.name) not in have:
                missing.append(f"{name} requires {r.name}")
    assert missing == []


def _top_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_the_app_only_packages_are_never_imported_by_core() -> None:
    dists = md.packages_distributions()
    app = {canonicalize_name(n) for n in pack_lists()["APP_ONLY"]}
    found = []
    for path in sorted(ROOT.glob("core/**/*.py")):
        for mod in _top_imports(path):
            if {canonicalize_name(d) for d in dists.get(mod, [])} & app:
                found.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert found == []


def _closure(names: set[str]) -> set[str]:
    """The names and, through the metadata installed here, everything they require."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        todo += [r.name for r in device_requirements(reqs)]
    return seen


def test_what_the_cli_imports_is_packed_or_on_the_machine() -> None:
    """Run the CLI's imports (its parser, chat, the loaders, the engine) in a fresh process and
    map every module it loaded to its distribution: each is packed, on the machine, or required
    by a package on the machine."""
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"  # what the interpreter's start loaded (site, .pth hooks)
        "import core.cli, core.chat.cli, core.models, core.models.gguf_convert, core.decode.engine\n"
        "core.cli.build_parser()\n"
        "print(' '.join(sorted({m.split('.')[0] for m in set(sys.modules) - before})))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lists = pack_lists()
    allowed = {canonicalize_name(Requirement(p).name) for p in lists["PACK"]}
    allowed |= _closure({canonicalize_name(n) for n in lists["MACHINE"]})
    allowed |= {"mlx-cpu"}  # this machine's backend; the device's is CUDA_PACK
    dists = md.packages_distributions()
    outside = set()
    for mod in proc.stdout.split():
        if mod in sys.stdlib_module_names or mod in ("core", "tui", "specdec_tui_presets"):
            continue
        for dist in dists.get(mod, []):
            if canonicalize_name(dist) not in allowed:
                outside.add(f"{mod} ({dist})")
    assert sorted(outside) == []
    assert "textual" not in proc.stdout.split()  # the headless CLI never loads the app


# Scripts that run the CLI on the device. first-use.sh measures a machine without a kernel
# cache, so it must not restore one; the rest restore a carried cache before they start.
CLI_SCRIPTS = sorted(p for folder in BENCH_SCRIPTS for p in folder.glob("*.sh"))


@pytest.mark.parametrize("script", CLI_SCRIPTS, ids=lambda p: p.name)
def test_benchmark_scripts_restore_a_carried_kernel_cache(script: Path) -> None:
    text = script.read_text()
    restores = "kcache.sh restore" in re.sub(r"^\s*#.*$", "", text, flags=re.M)
    assert restores == (script.name != "first-use.sh"), script.name
