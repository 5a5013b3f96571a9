"""specdec-tui core: the engine and everything headless; never imports Textual."""
