"""Files in and out: atomic writes, bounded reads of untrusted files, text shown to users.

Its modules are its API (`atomic`, `untrusted`, `user_text`), imported by their own names."""

__all__: list[str] = []
