"""Two runs side by side, as SpecDecApp's feature (tui/features/base.py): the pair the Profile
panel compares (A: the previous run or a recorded profile, B: the latest), and `x`, which
opens any two (this session's runs or saved profiles) in tui/screens/compare.py."""

from __future__ import annotations

from dataclasses import dataclass

from tui.engine_info import decoded
from tui.features.base import Feature, RecordedRunShown, RunRecorded
from tui.messages import ModelsLoaded
from tui.records import RunRecord
from tui.widgets.profile_panel import ProfilePanel


@dataclass
class CompareState:
    """The two runs the Profile panel shows: (A, B)."""

    pair: tuple[RunRecord | None, RunRecord | None] = (None, None)


class CompareFeature(Feature):
    """The compared pair, and `x`."""

    compare_state: CompareState

    @property
    def compare(self) -> tuple[RunRecord | None, RunRecord | None]:
        return self.compare_state.pair

    def _show_pair(self, pair: tuple[RunRecord | None, RunRecord | None]) -> None:
        self.compare_state.pair = pair
        self.query_one(ProfilePanel).show_compare(*pair)

    def on_run_recorded(self, message: RunRecorded) -> None:
        """A run just finished: it becomes B, and the run B was (or A) becomes A."""
        a, b = self.compare_state.pair
        self._show_pair((b if b is not None else a, message.record))

    def on_recorded_run_shown(self, message: RecordedRunShown) -> None:
        """A profile's recorded run was shown: it becomes A, the session's latest run B."""
        runs = self.runs_state.runs
        self._show_pair((message.record, runs[-1] if runs else None))

    def on_models_loaded(self, message: ModelsLoaded) -> None:
        """A pair was loaded: a recorded run's text (kept as ids) can be decoded now."""
        for record in self.compare_state.pair:
            if record is not None and not record.text:
                record.text = decoded(message.decode, message.info, record.summary.token_ids)
        self._show_pair(self.compare_state.pair)

    def on_profile_panel_compare_asked(self, message: ProfilePanel.CompareAsked) -> None:
        self.action_compare_runs()

    def action_compare_runs(self) -> None:
        """Two runs side by side: this session's runs and the saved profiles, A and B."""
        from tui.screens.compare import CompareScreen, live_run

        runs = self.runs_state.runs
        env = dict(self.info.environment) if self.info is not None else {}
        live = [live_run(i, record, env) for i, record in enumerate(runs)]

        def key(record: RunRecord | None) -> str | None:
            if record is None:
                return None
            for i, run in enumerate(runs):
                if run is record:
                    return f"live:{i}"
            return f"profile:{record.label}"  # a recorded profile shown in the panel

        a, b = self.compare_state.pair
        self.push_screen(CompareScreen(live, self.profiles_state.opened(), key(a), key(b)))
