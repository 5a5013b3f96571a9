"""Saved profiles in the app, as SpecDecApp's feature (tui/features/base.py): the store, save
(ctrl+s), switch (`p`, the Profile panel's list), a profile's recorded run shown in the panels,
and the active profile's name in the status line (its frozen part, tui/status.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from core.errors import UserError
from core.settings import Settings
from tui.features.base import Feature
from tui.records import RunRecord
from tui.screens.confirm_reload import ConfirmReloadScreen
from tui.screens.profile_picker import ProfilePickerScreen
from tui.screens.save_profile import SaveProfileScreen
from tui.status import ProfileStatus
from tui.widgets.profile_panel import ProfilePanel

DEFAULT = Settings()  # a profile naming these models means "what is loaded"


@dataclass
class ProfilesState:
    """The profile store (made on first use), where it lives, and what start had to say."""

    profiles_dir: Any = None  # --profiles-dir, else the default folder
    store: Any = None  # a core.profile.ProfileStore
    start_profile: Any = None  # --profile's, shown once mounted
    start_notices: list[str] = field(default_factory=list)  # a --profile run not loaded


class ProfilesFeature(Feature):
    """The profile store, its keys (save, switch) and a recorded run shown in the panels."""

    profiles_state: ProfilesState

    @property
    def profiles_dir(self) -> Any:
        return self.profiles_state.profiles_dir

    @property
    def start_notices(self) -> list[str]:
        """Said once mounted (a --profile whose recorded run could not be read)."""
        return self.profiles_state.start_notices

    @property
    def profile_name(self) -> str | None:
        """The active profile's name, None before one is saved or switched to."""
        return self.status.profile.name

    @property
    def profile_settings(self) -> Settings | None:
        """What the active profile set: the "(modified)" mark compares with it."""
        return self.status.profile.settings

    def store(self) -> Any:
        """The profile store: --profiles-dir (or the default folder) plus the shipped presets."""
        state = self.profiles_state
        if state.store is None:
            from core.profile import ProfileStore

            folder = None if state.profiles_dir is None else str(state.profiles_dir)
            state.store = ProfileStore.default(folder)
        return state.store

    def _profile_names(self) -> list[str]:
        try:  # an unreadable file is skipped here (note_unreadable_profiles says so)
            return [info.name for info in self.store().list() if info.error is None]
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return []

    def mount_profiles(self) -> None:
        """Once mounted: the list, what could not be read, and --profile's recorded run."""
        self._refresh_profiles()
        self.note_unreadable_profiles()
        start = self.profiles_state.start_profile
        if start is not None and start.run is not None:
            self._show_recorded(start)

    def note_unreadable_profiles(self) -> None:
        """At start: a profile file that cannot be read (corrupt, nested 500 deep, 50 MB) is
        left out of the lists, and said once, instead of closing the app on mount; so is a
        --profile whose recorded run could not be read (its settings are in use)."""
        for note in self.profiles_state.start_notices:
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
        self.set_status(profile=ProfileStatus(saved, self.settings))
        self._refresh_profiles()
        note = " (name taken, saved under a free one)" if saved != name else ""
        self.notify(f"saved profile {saved}{note}", title="profile")

    def save_profile(self, name: str) -> str:
        """Write settings + the last run's rounds and summary; returns the name it got."""
        from core.profile import Profile, ProfileRecorder

        last_run = self.last_run  # tui/features/runs.py
        if last_run is None:
            profile = Profile(name, self.settings)
        else:
            rounds, summary, run_settings, prompt, changes = last_run
            rec = ProfileRecorder(name, run_settings, settings_changes=changes)
            for ev in rounds:
                rec.add(ev)
            rec.add(summary)
            env = dict(self.info.environment) if self.info is not None else {}
            if self.last_run_at is not None:  # the run's time, not the session's
                env["timestamp"] = self.last_run_at  # tui/features/runs.py
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

    def action_switch_profile(self) -> None:
        try:
            presets = frozenset(i.name for i in self.store().list() if i.preset)
        except UserError:
            presets = frozenset()  # _profile_names says why
        self.push_screen(ProfilePickerScreen(self._profile_names(), self.profile_name, presets),
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
        self.set_status(profile=ProfileStatus(profile.name, settings))
        self.settings = settings
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
        """A profile's recorded run in the panels (unless a turn runs) and as compare's A."""
        run = profile.run
        self.show_recorded_rounds(run.rounds, run.summary)  # tui/features/runs.py
        if run.calibration:
            self.show_recorded_curve(run.calibration)  # tui/features/calibration.py
        record = RunRecord(profile.name, run.settings or profile.settings, run.summary,
                           self.decode_ids(run.summary.token_ids), run.summary.mean_tv)
        self.compare_recorded(record)  # tui/features/compare.py
        self.refresh_panels(all_panels=True)
