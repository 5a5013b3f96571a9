"""The benchmark: the seed's timing protocol, what each setting gave up, and the reports.

The seed's question was "which setting is faster here, and what does it cost the text?", so
one run answers both from the same requests: untraced, exactly N tokens with EOS ignored,
every request from an empty cache, the median end-to-end latency over I invocations x S
seeds against a target-only baseline measured in the same run, traced runs paired with
untraced ones for the phase split and the tracing overhead, and, per setting, the target's
NLL of the text against target-only's, the realised per-step TV, a greedy-equivalence check
and the outputs side by side. Peer rows time mlx-lm's own loops on the same models.

Modules: prompts (shipped prompts), tasks (checkable answers), results (rows and report),
fmt (number formats), requests (one request), protocol (`run_protocol`, `ProtocolConfig`,
`ProtocolInputs`), quality (NLL, greedy check), predicted (predicted beside measured),
provenance (the models every row ran), peer (mlx-lm), peer_pld (transformers' prompt lookup
and assisted generation), report (renderings), errors, cli (`specdec-tui bench`), flags (what
its flags ask for). The names below are the package's public API.
"""

from __future__ import annotations

from core.bench.cli import add_bench_arguments, run_bench_cli
from core.bench.errors import BenchCancelled, BenchError
from core.bench.flags import settings_from_args
from core.bench.peer import PEERS, Peer
from core.bench.prompts import (
    DEFAULT_PROMPT,
    PROMPT_KINDS,
    PROMPTS_DIR,
    fit_prompt_ids,
    load_prompt,
    prompt_check,
    prompt_kind,
    prompt_names,
    prompt_token_budget,
)
from core.bench.protocol import Progress, ProtocolConfig, ProtocolInputs, run_protocol
from core.bench.quality import NLL_BASIS, first_divergence, score_nll
from core.bench.report import CSV_COLUMNS, print_table
from core.bench.results import (
    BenchReport,
    BenchResult,
    BenchSetting,
    Divergence,
    SettingLike,
    describe,
)

__all__ = [
    "CSV_COLUMNS",
    "DEFAULT_PROMPT",
    "NLL_BASIS",
    "PEERS",
    "PROMPTS_DIR",
    "PROMPT_KINDS",
    "BenchCancelled",
    "BenchError",
    "BenchReport",
    "BenchResult",
    "BenchSetting",
    "Divergence",
    "Peer",
    "Progress",
    "ProtocolConfig",
    "ProtocolInputs",
    "SettingLike",
    "add_bench_arguments",
    "describe",
    "first_divergence",
    "fit_prompt_ids",
    "load_prompt",
    "print_table",
    "prompt_kind",
    "prompt_names",
    "prompt_check",
    "prompt_token_budget",
    "run_bench_cli",
    "run_protocol",
    "score_nll",
    "settings_from_args",
]
