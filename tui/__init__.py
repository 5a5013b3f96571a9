"""specdec-tui's Textual app."""
