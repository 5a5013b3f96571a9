"""Soak the app on the real default model: N minutes of chat turns with random keys between them.

Run from the repository root:  python docs/benchmarks/soak.py --minutes 5 [--json out.json]

The same driver as tests/tui/test_soak.py (tests/helpers/soak.py): headless Textual pilot, random
TV / k / mode / rule / policy / rejected keys and profile switches between turns, a cancel
mid-round every few turns, and after every turn the checks (the app answered, it shows the
settings the engine ran with, nothing failed unseen). Here the engine is the real one
(tui.session.MLXSession on the default pair) and memory is sampled from Python (allocated
blocks, live objects, counted after Textual's and Rich's bounded memo caches are emptied)
and from MLX (active memory), so a leak shows as growth that does not stop. `--context` lowers the context window so the chat also drops its oldest turns (and the
engine re-prefills) within a few minutes. Prints a Markdown summary; exits 1 if a check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from core.events import RoundEvent  # noqa: E402
from core.profile import Profile, ProfileStore  # noqa: E402
from core.settings import Settings  # noqa: E402
from tests.helpers.soak import SoakReport, soak  # noqa: E402
from tui.app import SpecDecApp  # noqa: E402
from tui.session import MLXSession  # noqa: E402


def recording_session(context: int | None):  # noqa: ANN201 - a session factory
    """MLXSession that remembers the settings its engine read last and counts its rounds."""

    class Recording(MLXSession):
        def __init__(self, target: str, draft: str | None) -> None:
            super().__init__(target, draft)
            self.last: Settings | None = None
            self.rounds = 0
            if context is not None:
                self.context_window = min(self.context_window or context, context)

        def generate(self, prompt_ids, settings, cancel, settings_source):  # noqa: ANN001, ANN201
            def source() -> Settings:
                self.last = settings_source()
                return self.last

            for item in super().generate(prompt_ids, settings, cancel, source):
                if isinstance(item, RoundEvent):
                    self.rounds += 1
                yield item

    Recording.park_thread_on_close = MLXSession.park_thread_on_close
    return Recording


async def run(args: argparse.Namespace) -> tuple[SoakReport, dict]:
    folder = Path(tempfile.mkdtemp(prefix="soak-profiles-"))
    store = ProfileStore(folder, presets=None)
    base = Settings(max_tokens=args.max_tokens)
    for name, changes in (("fast", {"k": 6, "tv_budget": 1.0}), ("careful", {"k": 2}),
                          ("solo", {"mode": "target-only"})):
        store.save(Profile(name, base.replace(**changes)))
    sessions: list = []
    factory_class = recording_session(args.context)

    def factory(target: str, draft: str | None):  # noqa: ANN202
        sessions.append(factory_class(target, draft))
        return sessions[-1]

    factory.park_thread_on_close = True  # type: ignore[attr-defined]  # see EngineBridge._serve
    app = SpecDecApp(base, factory, profiles_dir=folder, profile_store=store)
    started = time.monotonic()

    def progress(turn: int, report: SoakReport) -> None:
        if turn % 5 == 0:
            s = report.samples[-1] if report.samples else None
            mlx = f", MLX active {s.mlx_active / 2**20:.0f} MiB" if s and s.mlx_active else ""
            print(f"  turn {turn}: {time.monotonic() - started:.0f} s, last turn "
                  f"{report.turn_seconds[-1]:.2f} s{mlx}", file=sys.stderr, flush=True)

    async with app.run_test(size=(160, 45)) as pilot:
        report = await soak(
            pilot, seconds=args.minutes * 60, seed=args.seed,
            profiles=("careful", "fast", "solo"),
            engine_settings=lambda: sessions[-1].last if sessions else None,
            engine_rounds=lambda: sessions[-1].rounds if sessions else 0,
            cancel_every=7, sample_every=args.sample_every, turn_timeout=300.0, mlx=True,
            on_turn=progress,
        )
        extra = {"messages_kept": len(app.messages), "runs_kept": len(app.runs),
                 "context_window": sessions[-1].context_window if sessions else None}
    return report, extra


def summary(report: SoakReport, extra: dict, args: argparse.Namespace) -> dict:
    lat = report.turn_seconds
    tenth = max(len(lat) // 10, 1)
    samples = report.samples
    return {
        "minutes": round(report.seconds / 60, 2),
        "turns": report.turns,
        "keys": report.keys,
        "cancels": report.cancels,
        "profile_switches": report.switches,
        "context_trims": report.trims,
        "turn_s_median": round(statistics.median(lat), 3) if lat else None,
        "turn_s_p95": round(sorted(lat)[int(0.95 * (len(lat) - 1))], 3) if lat else None,
        "turn_s_max": round(max(lat), 3) if lat else None,
        "turn_s_first_tenth_median": round(statistics.median(lat[:tenth]), 3) if lat else None,
        "turn_s_last_tenth_median": round(statistics.median(lat[-tenth:]), 3) if lat else None,
        "samples": [
            {"turn": s.turn, "py_blocks": s.blocks, "py_objects": s.objects,
             "widgets": s.widgets, "mlx_active_mib": round((s.mlx_active or 0) / 2**20, 1),
             "textual_memo_entries": s.memo_entries}
            for s in samples
        ],
        "thread_errors": report.thread_errors,
        "settings": {"max_tokens": args.max_tokens, "context": args.context, "seed": args.seed},
        **extra,
    }


def markdown(s: dict) -> str:
    lines = [
        f"soak: {s['turns']} turns in {s['minutes']} min on the default pair "
        f"({s['keys']} keys, {s['cancels']} cancels, {s['profile_switches']} profile switches, "
        f"{s['context_trims']} context trims; context window {s['context_window']})",
        f"turn seconds: median {s['turn_s_median']}, p95 {s['turn_s_p95']}, max "
        f"{s['turn_s_max']}; first tenth {s['turn_s_first_tenth_median']}, last tenth "
        f"{s['turn_s_last_tenth_median']}",
        "",
        "| turn | Python blocks | Python objects | widgets | MLX active MiB |",
        "|---:|---:|---:|---:|---:|",
    ]
    for x in s["samples"]:
        lines.append(f"| {x['turn']} | {x['py_blocks']:,} | {x['py_objects']:,} | "
                     f"{x['widgets']} | {x['mlx_active_mib']} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--max-tokens", type=int, default=24, help="tokens per answer")
    p.add_argument("--context", type=int, default=768,
                   help="context window to soak with (lower than the model's, so turns drop)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample-every", type=int, default=5, help="turns between memory samples")
    p.add_argument("--json", default=None, metavar="PATH")
    args = p.parse_args()
    try:
        report, extra = asyncio.run(run(args))
    except AssertionError as exc:
        print(f"soak check failed: {exc}", file=sys.stderr)
        return 1
    s = summary(report, extra, args)
    print(markdown(s))
    if args.json:
        Path(args.json).write_text(json.dumps(s, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
