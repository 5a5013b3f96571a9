"""specdec-tui's Textual app: tui.app is its entry (build_app, run_app, SpecDecApp) and
re-exports what the CLI and the tests use; this package file re-exports nothing, so importing
one of its modules does not start Textual's app machinery."""

__all__: list[str] = []
