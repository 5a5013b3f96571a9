"""What fills the screen, as SpecDecApp's feature (tui/features/base.py): the chat and the panel
tabs side by side, or one of them below NARROW columns (ctrl+t, the palette's views); the
header's title at that width; the panels redrawn from the state as it is, with plots or
their numbers (`v`)."""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.content import Content
from textual.widgets import Header, TabbedContent

from tui.features.base import Feature, RecordedRunShown
from tui.keys import NARROW, PANES, VIEWS
from tui.widgets.acceptance import AcceptancePanel
from tui.widgets.composer import Composer
from tui.widgets.kernels import KernelsPanel
from tui.widgets.rounds import RoundsPanel

# Columns of the header that are not its title: the icon (8) and the clock's space (10).
HEADER_CHROME = 18
DEVICE_CUT = 16  # "AMD EPYC 7763 64-Core Processor" is cut to its first 15 characters

@dataclass
class ViewState:
    """The view below NARROW columns ("chat" or a pane id), the width as last laid out, and
    whether the Kernels and Acceptance panels draw plots or their numbers."""

    view: str = "chat"
    narrow: bool = False
    show_plots: bool = True


class ViewFeature(Feature):
    """Layout, the title at any width, tabs and panels."""

    view_state: ViewState

    @property
    def narrow(self) -> bool:
        """Laid out one view at a time (below NARROW columns, as of the last resize)."""
        return self.view_state.narrow

    def on_resize(self, event: events.Resize) -> None:
        self._lay_out(event.size.width)

    def _lay_out(self, width: int | None = None) -> None:
        """Side by side when both fit; else only the chosen view, the other a key away."""
        if not self.is_mounted:
            return
        narrow = (self.size.width if width is None else width) < NARROW
        self.view_state.narrow = narrow
        main = self.query_one("#main")
        main.set_class(narrow, "narrow")
        from textual.widgets._header import HeaderTitle

        header = self.query_one(Header)  # format_title reads the width: say it again
        for title in header.query(HeaderTitle):
            title.update(header.format_title())
        main.set_class(narrow and self.view_state.view != "chat", "show-panels")

    def format_title(self, title: str, sub_title: str) -> Content:
        """The header is one line: "specdec-tui — target ← draft · backend · device" was cut
        at 80 columns, so below NARROW columns it is the pair alone."""
        if sub_title and self.view_state.narrow:
            return Content(self._narrow_title(sub_title))
        return super().format_title(title, sub_title)  # type: ignore[misc]

    def _narrow_title(self, sub_title: str) -> str:
        """target ← draft · backend · device in the header's room, long names cut in their
        middle and a long device name at its end: a GGUF's own names are 40 characters, and
        at 80 columns the backend and device were cut off the end."""
        info = self.info
        room = self.size.width - HEADER_CHROME
        if info is None or len(sub_title) <= room:
            return sub_title
        device = info.device or ""
        device = device if len(device) <= DEVICE_CUT else device[: DEVICE_CUT - 1] + "…"
        tail = f" · {info.backend}" + (f" · {device}" if device else "")
        target, draft = info.target_name, info.draft_name or "no draft"
        each = max((room - len(" ← ") - len(tail)) // 2, 8)

        def cut(name: str) -> str:
            if len(name) <= each:
                return name
            head = (each - 1) // 2
            return name[:head] + "…" + name[len(name) - (each - 1 - head):]

        return f"{cut(target)} ← {cut(draft)}{tail}"

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.call_after_refresh(self.refresh_panels)

    def refresh_panels(self, all_panels: bool = False) -> None:
        """Redraw the visible panel (or all): hidden ones catch up when their tab opens."""
        if not self.is_mounted:
            return
        active = self.query_one(TabbedContent).active
        runs = self.runs_state
        if all_panels or active == "rounds":
            self.query_one(RoundsPanel).show(runs.stats)
        if all_panels or active == "acceptance":
            self.query_one(AcceptancePanel).show(runs.stats, runs.sources, runs.last_copy)
        if all_panels or active == "kernels":
            self.query_one(KernelsPanel).show(self.info, runs.stats, self.curve,
                                              self.status.calibration.label)

    def on_recorded_run_shown(self, message: RecordedRunShown) -> None:
        """A profile's recorded run: every panel drawn once runs, calibration and compare
        folded it (they come before this feature in the app's bases)."""
        self.refresh_panels(all_panels=True)

    def show_panel(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane
        if self.view_state.view != "chat":
            self.view_state.view = pane
            self._lay_out()
        self.refresh_panels()  # drawn now from the state as it is, not after the next refresh

    def action_next_view(self) -> None:
        """ctrl+t: the next panel tab; below NARROW columns the chat is one of the views."""
        state = self.view_state
        if state.narrow:
            self.action_show_view(VIEWS[(VIEWS.index(state.view) + 1) % len(VIEWS)])
            return
        panes = [pane for pane, _ in PANES]
        active = self.query_one(TabbedContent).active
        nxt = panes[(panes.index(active) + 1) % len(panes)] if active in panes else panes[0]
        self.show_panel(nxt)

    def action_show_view(self, view: str) -> None:
        """The chat or one panel (the palette, and ctrl+t in turn); side by side both stay,
        below NARROW columns the chosen one fills the screen."""
        self.view_state.view = view
        if view == "chat":
            self._lay_out()
            self.query_one("#prompt", Composer).focus()
            return
        self.query_one(TabbedContent).active = view
        self._lay_out()
        if self.view_state.narrow:  # the message box is hidden: single keys act on the panel
            self.screen.set_focus(None)
        self.refresh_panels()

    def action_toggle_plots(self) -> None:
        """The Kernels and Acceptance panels: plots, or their numbers."""
        state = self.view_state
        state.show_plots = not state.show_plots
        self.query_one(KernelsPanel).set_plots(state.show_plots)
        self.query_one(AcceptancePanel).set_plots(state.show_plots)

    def action_focus_input(self) -> None:
        if self.view_state.view != "chat":
            self.action_show_view("chat")
        self.query_one("#prompt", Composer).focus()
