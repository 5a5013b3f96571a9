"""`specdec-tui chat`: the headless chat, one decode loop printed to the terminal.

Its modules are its API (`cli`, `palette`, which the app's transcript shares); nothing is
re-exported, so the app importing the palette does not load the chat command."""

__all__: list[str] = []
