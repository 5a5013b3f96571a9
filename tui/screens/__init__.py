"""The app's screens, one a file (compare, sweep, the modals); each imported by its own module
name where it is pushed."""

__all__: list[str] = []
