"""Editing keys applied in the order they were typed (Textual issue #6605, fix proposed in #6631).

Textual's Input and TextArea insert a printable key in the widget's own `_on_key`, but run a
bound key (backspace, the arrows, ctrl+u, ctrl+k, ...) only once the event has bubbled up to
the app (`App._on_key`), behind the keys already queued for the widget. Keys that arrive in one
read are applied out of order: tmux's `send-keys C-u abc` into the save dialog left the name
empty (ctrl+u ran after "abc" was typed and deleted it), and a fast typist's backspace on a
busy app (a run under way holds the engine thread) can land after the next letter. This mixin
runs the widget's own non-priority bindings inline, from its `_on_key`, as the app would have
resolved them (the focused widget is the first namespace of the binding chain, and priority
bindings were checked before the key reached it), so nothing but the order changes.
"""

from __future__ import annotations

from typing import Any

from textual import events


class InlineBindings:
    """Mix in before Input or TextArea: its own bindings run as the key arrives."""

    async def _on_key(self, event: events.Key) -> None:
        if event.is_printable:
            return  # inserted by the widget's own handler, in order already
        widget: Any = self
        chain = widget.screen._modal_binding_chain  # keymap applied, consumed keys filtered
        if not chain or chain[0][0] is not widget:
            return
        for binding in chain[0][1].key_to_bindings.get(event.key, ()):
            if not binding.priority and await widget.app.run_action(binding.action, widget):
                event.stop()
                event.prevent_default()  # handled: neither the widget's insert nor the app
                return
