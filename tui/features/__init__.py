"""The app by feature: each module one feature's actions, message handlers and state
(runs, calibration, bench, profiles, compare, models, view, settings_keys); base.py the seam
they share with the shell (tui/app.py). The shell imports each module by name."""

__all__: list[str] = []
