"""Saved profiles in the app: save, switch, compare; mixed into SpecDecApp (tui/app.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from core.errors import UserError
from core.settings import Settings
from tui.engine_info import CurveInfo
from tui.records import RunRecord
from tui.screens.modals import ConfirmReloadScreen, ProfilePickerScreen, SaveProfileScreen
from tui.stats import RoundStats
from tui.widgets.profile_panel import ProfilePanel

DEFAULT = Settings()  # a profile naming these models means "what is loaded"


class ProfileActions:
    """The profile store, its keys (save, switch, compare) and a recorded run shown in the panels."""

    def store(self) -> Any:
        """The profile store: --profiles-dir (or the default folder) plus the shipped presets."""
        if self._store is None:
            from core.profile import ProfileStore

            folder = None if self.profiles_dir is None else str(self.profiles_dir)
            self._store = ProfileStore.default(folder)
        return self._store

    def _profile_names(self) -> list[str]:
        try:  # an unreadable file is skipped here (note_unreadable_profiles says so)
            return [info.name for info in self.store().list() if info.error is None]
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return []

    def note_unreadable_profiles(self) -> None:
        """At start: a profile file that cannot be read (corrupt, nested 500 deep, 50 MB) is
        left out of the lists, and said once, instead of closing the app on mount; so is a
        --profile whose recorded run could not be read (its settings are in use)."""
        for note in getattr(self, "start_notices", ()):
            self.notify(note, title="profile", severity="warning", timeout=8)
        try:
            infos = self.store().list()
        except UserError:
            return  # _profile_names says why
        for info in infos:
            if info.error is not None:
                self.notify(f"Skipped profile {info.name}: {info.error}", title="profiles",
                            severity="warning", timeout=8)  # fmt: skip

    def _refresh_profiles(self) -> None:
        self.query_one(ProfilePanel).show_profiles(self._profile_names(), self.profile_name)

    def action_save_profile(self) -> None:
        self.push_screen(SaveProfileScreen(self.profile_name or "my-profile"),
                         self._save_profile)

    def _save_profile(self, name: str | None) -> None:
        if not name:
            return
        try:
            saved = self.save_profile(name)
        except UserError as exc:
            self.notify(str(exc), title="not saved", severity="error")
            return
        self.profile_name = saved
        self.profile_settings = self.settings
        self._show_settings()
        self._refresh_profiles()
        note = " (name taken, saved under a free one)" if saved != name else ""
        self.notify(f"saved profile {saved}{note}", title="profile")

    def save_profile(self, name: str) -> str:
        """Write settings + the last run's rounds and summary; returns the name it got."""
        from core.profile import Profile, ProfileRecorder

        if self.last_run is None:
            profile = Profile(name, self.settings)
        else:
            rounds, summary, run_settings, prompt, changes = self.last_run
            rec = ProfileRecorder(name, run_settings, settings_changes=changes)
            for ev in rounds:
                rec.add(ev)
            rec.add(summary)
            env = dict(self.info.environment) if self.info is not None else {}
            profile = rec.profile(
                prompt=prompt,
                calibration=self.curve.raw if self.curve is not None else None,
                environment=env,
            )
            profile = dataclasses.replace(profile, settings=self.settings)
        store = self.store()
        # Saving under the active profile's own name updates it; any other taken name gets a
        # free variant, so a save never clobbers a profile the user did not mean.
        own = name == self.profile_name and store.toml_path(name).is_file()
        return store.save(profile, overwrite=own)

    def action_compare_runs(self) -> None:
        """Two runs side by side: this session's runs and the saved profiles, A and B."""
        from tui.screens.compare import CompareScreen, live_run

        env = dict(self.info.environment) if self.info is not None else {}
        live = [live_run(i, record, env) for i, record in enumerate(self.runs)]

        def key(record: RunRecord | None) -> str | None:
            if record is None:
                return None
            for i, run in enumerate(self.runs):
                if run is record:
                    return f"live:{i}"
            return f"profile:{record.label}"  # a recorded profile shown in the panel

        a, b = self.compare
        self.push_screen(CompareScreen(live, self.store(), key(a), key(b)))

    def action_switch_profile(self) -> None:
        self.push_screen(ProfilePickerScreen(self._profile_names(), self.profile_name),
                         self.switch_profile)

    def on_option_list_option_selected(self, event: Any) -> None:
        if event.option_list.id == "profile-list" and event.option.id:
            self.switch_profile(event.option.id)

    def switch_profile(self, name: str | None) -> None:
        """Load a saved profile: its settings become active, its recorded run fills the panels.

        Presets change settings, not models: a profile's target "default" with the default
        draft means "what is loaded" (every shipped preset says so, and picking one once
        swapped a loaded Qwen pair for SmolLM2). A profile that names other models asks
        before reloading; kept, only its settings apply."""
        if not name:
            return
        try:
            profile = self.store().load(name)
        except UserError as exc:
            self.notify(str(exc), title="profile not loaded", severity="error")
            return
        old = self.settings
        want = (profile.settings.target, profile.settings.draft)
        if want in ((DEFAULT.target, DEFAULT.draft), (old.target, old.draft)):
            self._apply_profile(profile, reload=False)
            return
        draft = want[1] or "no draft"
        question = (f"Profile {profile.name} names the models {want[0]} ← {draft}; loaded are "
                    f"{old.target} ← {old.draft or 'no draft'}. Load its models? The "
                    "conversation stays on screen, and the new pair reads it afresh.")
        self.push_screen(ConfirmReloadScreen(question),
                         lambda load: self._apply_profile(profile, reload=bool(load)))

    def _apply_profile(self, profile: Any, *, reload: bool) -> None:
        old = self.settings
        settings = profile.settings
        if not reload:  # the loaded pair stays; the profile's settings apply to it
            settings = settings.replace(target=old.target, draft=old.draft)
        self.profile_name = profile.name
        self.profile_settings = settings
        self.settings = settings
        self._show_settings()
        self._refresh_profiles()
        if reload:
            if self.run_id is not None:
                self.bridge.cancel()
            self.bridge.load(settings.target, settings.draft)
        if profile.run is not None:
            self._show_recorded(profile)
        kept = "" if reload else " (the loaded models kept)"
        self.notify(f"switched to profile {profile.name}{kept}", title="profile", timeout=2)

    def _show_recorded(self, profile: Any) -> None:
        run = profile.run
        if self.run_id is None:
            self.stats = RoundStats.from_rounds(run.rounds, run.summary)
        if run.calibration:
            self.curve = curve_from_dict(run.calibration)
        record = RunRecord(profile.name, run.settings or profile.settings, run.summary,
                           self._decode_ids(run.summary.token_ids), run.summary.mean_tv)
        self.compare = (record, self.runs[-1] if self.runs else None)
        self.query_one(ProfilePanel).show_compare(*self.compare)
        self._refresh_panels(all_panels=True)

    def _decode_ids(self, ids: Iterable[int]) -> str:
        """A recorded run's text, when a tokenizer is loaded (a profile stores ids only)."""
        if self.decode is None or self.info is None:
            return ""
        keep = [i for i in ids if i not in self.info.eos_ids]
        try:
            return str(self.decode(keep))
        except Exception:  # ids from another vocabulary: show no text rather than fail
            return ""


def curve_from_dict(data: dict[str, Any]) -> CurveInfo | None:
    """A stored calibration back into a CurveInfo (via core.dispatch when it can)."""
    try:
        from core.dispatch import VerifyCostCurve
        from tui.session import curve_info

        return curve_info(VerifyCostCurve.from_dict(data))
    except Exception:  # a profile from another version: show no curve rather than fail
        return None
