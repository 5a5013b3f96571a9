"""The app's widgets, one a file; each imported by its own module name where it is composed."""

__all__: list[str] = []
