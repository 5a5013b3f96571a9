"""`specdec-tui calibrate`: a command above the engine (it loads pairs, reads profiles, may
shard the target and warms up before it times), so it sits apart from core/dispatch/, which
the engine and the runtime import. Its one module, `cli`, is its API (core/cli.py imports it)."""

__all__: list[str] = []
