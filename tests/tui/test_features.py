"""tui/features/: the app cut by feature over one seam (tui/features/base.py), one status
reactive drawn by its watcher (tui/status.py), and a thin shell (tui/app.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from textual.app import App

from tests.helpers.app import ready, wait_for
from tui.app import SpecDecApp
from tui.features.base import AppShell, Feature
from tui.status import BenchStatus, Status

TUI = Path(__file__).resolve().parents[2] / "tui"
# Each feature module: the state object it owns and the part of the status it replaces.
OWNS = {
    "runs.py": ("runs_state", "run"),
    "calibration.py": ("calibration_state", "calibration"),
    "bench.py": ("bench_state", "bench"),
    "profiles.py": ("profiles_state", "profile"),
    "compare.py": ("compare_state", None),
    "models.py": ("models_state", "models"),
    "view.py": ("view_state", None),
    "settings_keys.py": (None, None),
}


def test_every_feature_module_is_mixed_into_the_shell() -> None:
    modules = {p.name for p in (TUI / "features").glob("*.py")} - {"__init__.py", "base.py"}
    assert modules == set(OWNS)
    features = [c for c in SpecDecApp.__mro__ if issubclass(c, Feature) and c is not Feature
                and c is not SpecDecApp]
    assert {c.__module__.rsplit(".", 1)[1] + ".py" for c in features} == set(OWNS)


def test_the_shell_has_what_the_seam_declares() -> None:
    declared = set(AppShell.__annotations__) | {
        n for n, v in vars(AppShell).items() if callable(v) and not n.startswith("_")}
    app = SpecDecApp(session_factory=lambda *a: None)
    missing = [n for n in sorted(declared) if not hasattr(app, n)]
    assert not missing, missing


def state_writes(text: str) -> set[str]:
    """The `self.X_state` objects a module's code writes: an assignment or augmented assignment
    to one of their attributes (or items), at any depth (`self.runs_state.stats.summary = s`)."""
    written: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
        for target in targets:
            while isinstance(target, ast.Attribute | ast.Subscript):
                base = target.value
                if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) \
                        and base.value.id == "self" and base.attr.endswith("_state"):
                    written.add(base.attr)
                target = base
    return written


def test_a_feature_writes_only_its_own_state_and_status_part() -> None:
    for name, (own, part) in OWNS.items():
        text = (TUI / "features" / name).read_text()
        states = state_writes(text)
        assert states <= ({own} if own else set()), (name, states)
        parts = set(re.findall(r"set_status\((\w+)=", text))
        assert parts <= ({part} if part else set()), (name, parts)
    # ... and the shell does not write the parts either: it only draws them
    shell = (TUI / "app.py").read_text()
    assert "set_status(" not in shell
    # the names read on the app are views of a feature's state: nothing else writes them
    app = SpecDecApp(session_factory=lambda *a: None)
    for name in ("curve", "run_id", "calibrating", "benchmarking", "profile_name", "compiling"):
        with pytest.raises(AttributeError):
            setattr(app, name, None)


def test_the_write_check_sees_another_feature_s_state_written() -> None:
    """A control: reads of another state pass, a write at any depth does not."""
    text = ("def f(self):\n    x = self.runs_state.stats\n    self.view_state.view = 'chat'\n"
            "    self.runs_state.stats.summary = x\n    self.models_state.info = None\n")
    assert state_writes(text) == {"view_state", "runs_state", "models_state"}
    assert state_writes("def f(self):\n    y = self.runs_state.last_prompt()\n") == set()


def cross_calls(files: dict[str, str], allowed: set[str]) -> list[str]:
    """'module calls self.name()' for each method a feature module calls on the app that
    another feature module defines, unless the shell's seam declares it (`allowed`)."""
    defined = {f: {n.name for n in ast.walk(ast.parse(t)) if isinstance(n, ast.FunctionDef)}
               for f, t in files.items()}
    out = []
    for f, text in files.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "self" and node.attr not in allowed \
                    and node.attr not in defined[f]:
                owners = [g for g, names in defined.items() if g != f and node.attr in names]
                if owners:
                    out.append(f"{f} calls self.{node.attr} of {owners[0]}")
    return sorted(set(out))


def _seam() -> set[str]:
    return set(AppShell.__annotations__) | set(vars(AppShell)) | set(vars(Feature)) \
        | set(dir(App))


def test_no_feature_calls_another_feature_s_methods() -> None:
    """Features tell each other things by messages (tui/features/base.py) and read each
    other's state through the seam; a method of another feature is neither."""
    files = {p.name: p.read_text() for p in (TUI / "features").glob("*.py")
             if p.name in OWNS}
    assert cross_calls(files, _seam()) == []


def test_the_call_check_sees_a_feature_calling_another() -> None:
    """A control: runs calling compare's method is found; a seam member and a Textual method
    of the app are not."""
    files = {"runs.py": "class R:\n    def done(self, r):\n        self.compare_latest(r)\n"
                        "        self.refresh_panels()\n        self.notify('x')\n",
             "compare.py": "class C:\n    def compare_latest(self, r):\n        pass\n",
             "view.py": "class V:\n    def refresh_panels(self):\n        pass\n"}
    assert cross_calls(files, _seam()) == ["runs.py calls self.compare_latest of compare.py"]


def test_only_apply_writes_the_settings() -> None:
    """State changes go through `apply` (validated): no feature assigns `self.settings`."""
    for path in (TUI / "features").glob("*.py"):
        assert not re.search(r"\bself\.settings\s*=[^=]", path.read_text()), path.name


def test_the_status_line_is_drawn_only_from_the_reactives() -> None:
    calls = {}
    for path in TUI.rglob("*.py"):
        text = path.read_text()
        assert "_show_settings" not in text and "_show_banner" not in text, path
        if "_draw_status(" in text:
            calls[path.name] = text.count("_draw_status(")
    # its definition, on_mount, watch_settings, watch_status and the elapsed-time tick
    assert calls == {"app.py": 5}


def test_the_shell_sets_few_attributes() -> None:
    """Its __init__ set 31 loose attributes; state now lives in one object a feature."""
    bare = set(vars(App()))
    app = SpecDecApp(session_factory=lambda *a: None)
    own = {n for n in set(vars(app)) - bare if not n.startswith("_reactive_")}  # Textual's
    states = {n for n in own if n.endswith("_state")}
    assert states == {s for s, _ in OWNS.values() if s}
    assert own - states == {"live_settings", "bridge", "_quit_timer", "_banner_from"}


async def test_a_change_of_status_redraws_the_line_by_itself(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)

        def line() -> str:
            return str(app.query_one("#status").render())

        await wait_for(pilot, lambda: "ready" in line())
        app.status = app.status.with_(bench=BenchStatus(True, "20% seed 1"))
        assert "benchmarking: 20% seed 1" in line() and app.benchmarking and app.busy
        app.status = app.status.with_(bench=BenchStatus())
        assert "benchmarking" not in line() and not app.busy
        app.apply(k=app.settings.k + 1)
        assert f"k {app.settings.k}" in line()
        assert isinstance(app.status, Status)


def test_no_private_helper_crosses_files() -> None:
    """`_last_prompt` and `_decode_ids` were called from modules that did not define them:
    what one feature offers another is public (tui/features/base.py says which)."""
    for path in [*(TUI / "features").glob("*.py"), TUI / "app.py"]:
        text = path.read_text()
        for name in set(re.findall(r"\bself\.(_[a-z]\w*)", text)):
            defined = re.search(rf"def {name}\b|self\.{name}\s*(:|=)", text)
            assert defined, f"{path.name} uses self.{name}, defined elsewhere"
