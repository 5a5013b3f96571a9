"""Profiles: named Settings plus an optional recorded run, kept on disk so they can be trusted.

One idea per module: `records` (the types and the name rule), `files` (schema, migrations,
reading and where files live), `run_check` (a run file's fields checked), `store` (atomic, never-clobbering saves), `recorder` (a run into
a Profile), `export` (diff, metrics, CSV), `chrome_trace` (a run as a Chrome trace for Perfetto)
and `cli` (`specdec-tui profiles`). Import from here.
"""

from __future__ import annotations

from core.profile.chrome_trace import (
    TracedRequest,
    TraceError,
    chrome_trace,
    profile_request,
    trace_json,
    write_trace,
)
from core.profile.cli import add_profiles_arguments, run_profiles_cli
from core.profile.export import (
    CSV_COLUMNS,
    diff_settings,
    export_csv,
    plain_number,
    rounds_csv,
    summary_metrics,
    value_text,
)
from core.profile.files import (
    APP_NAME,
    RUN_SUFFIX,
    SCHEMA,
    TOML_SUFFIX,
    load_file,
    profiles_dir,
    shipped_presets_dir,
    write_atomic,
)
from core.profile.recorder import ProfileRecorder, record_environment
from core.profile.records import Profile, ProfileError, ProfileInfo, RecordedRun, validate_name
from core.profile.store import ProfileStore, load_profile, profile_paths

__all__ = [
    "APP_NAME",
    "CSV_COLUMNS",
    "RUN_SUFFIX",
    "SCHEMA",
    "TOML_SUFFIX",
    "TraceError",
    "TracedRequest",
    "Profile",
    "ProfileError",
    "ProfileInfo",
    "ProfileRecorder",
    "ProfileStore",
    "RecordedRun",
    "add_profiles_arguments",
    "chrome_trace",
    "diff_settings",
    "export_csv",
    "load_file",
    "load_profile",
    "plain_number",
    "profile_paths",
    "profile_request",
    "profiles_dir",
    "record_environment",
    "rounds_csv",
    "run_profiles_cli",
    "shipped_presets_dir",
    "summary_metrics",
    "value_text",
    "trace_json",
    "validate_name",
    "write_atomic",
    "write_trace",
]
