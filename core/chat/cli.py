"""One-shot chat from the command line: the answer streamed, then the run's numbers.

The quickest proof that a pair works, headless: the same engine loop as the TUI, printed with
rich instead of drawn, from the same first-run settings (core.settings.first_run_settings)
and the same flags-to-Settings table (core.settings.flag_changes).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from core.chat.palette import TERMINAL_STYLES
from core.cost.guard import guard_lines
from core.events import RoundEvent, RunSummary, phase_label, phase_shares, time_accounting
from core.io.user_text import prompt_text
from core.settings import Settings, first_run_settings, flag_changes

# The committed origins' colours: the app's palette (core/chat/palette.py), one for both.
ORIGIN_STYLE = TERMINAL_STYLES


def legend() -> Text:
    """Which colour is which origin: the answer is coloured, and nothing said so."""
    text = Text("colours: ", style="dim")
    for origin, style in ORIGIN_STYLE.items():
        text.append("■ ", style=style)
        text.append(origin + "  ", style="dim")
    return text


class Waiting:
    """The wait before the first token (an 80 s prefill said nothing): a spinner with the
    elapsed time on a terminal, one line into a log; gone at the first round."""

    def __init__(self, err: Console, what: str) -> None:
        self._status: Any = None
        if err.is_terminal:
            from rich.status import Status

            self._status = Status(Text(what + "…"), console=err)
            self._status.start()
        else:
            err.print(Text(what + "…"))

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def calibration_progress(err: Console) -> Callable[[int, int, str], None]:
    """The calibration a cost-aware run would make silently inside its first round, told with
    its percentage on stderr: the reporter core.runtime.calibration.curve_for calls (a
    terminal gets one line redrawn, a log a line per 10%)."""
    last = [-1]

    def report(done: int, total: int, label: str) -> None:
        pct = int(100 * done / total) if total else 0
        if err.is_terminal or pct // 10 != last[0] // 10:
            err.print(Text(f"calibrating the verify cost (first use of the cost-aware k): "
                           f"{pct}% {label}"), end="\r" if err.is_terminal else "\n")
            last[0] = pct

    return report


def summary_table(summary: RunSummary, rounds: Sequence[RoundEvent] = ()) -> Table:
    """The numbers a user checks first, as a two-column table; with the run's `rounds`, its
    E2E in parts that add up to it (core.events.time_accounting)."""
    t = Table(show_header=False, box=None)
    rows = [
        ("mode", summary.mode + (f" (fell back: {summary.fallback_reason})"
                                 if summary.fallback_reason else "")),
        ("tokens / rounds", f"{summary.tokens} / {summary.rounds}"),
        ("TTFT", f"{summary.ttft_s * 1e3:.0f} ms"),
        # 0: too few rounds to time decoding apart from the first token (RunSummary)
        ("decode", f"{summary.decode_tok_s:.1f} tok/s" if summary.decode_tok_s else "-"),
        ("E2E", f"{summary.e2e_s:.2f} s"),
    ]
    if rounds:
        rows.append(("E2E parts", " + ".join(f"{name} {seconds:.2f} s" for name, seconds
                                             in time_accounting(summary, rounds).items())))
    if summary.acceptance is not None:
        rows.append(("acceptance", f"{summary.acceptance:.1%}"))
        rows.append(("mean accepted length", f"{summary.mean_accepted_length:.2f}"))
    rows.extend(source_rows(summary))
    shares = phase_shares(summary.phase_s, summary.traced)
    if shares is not None:
        sharded = shares["comm"] > 0  # then verify is compute, comm a price
        rows.append(("phases", "  ".join(
            f"{phase_label(k, sharded)} {v:.0%}" for k, v in shares.items() if v)))
    for k, v in rows:
        t.add_row(Text(k, style="bold"), Text(v))  # a reason may quote a user's spec: no markup
    return t


def source_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """One line per draft source when a run used another than the draft model alone."""
    per = summary.per_source
    if not per or set(per) == {"model"}:
        return []
    spec_rounds = sum(int(v.get("rounds", 0)) for v in per.values())
    out = []
    for name, v in per.items():
        share = f"{v['rounds'] / spec_rounds:.0%} of rounds" if spec_rounds else "-"
        if name == "none":
            out.append(("target steps", f"{v['rounds']} ({share})"))
            continue
        acc = v.get("acceptance")
        mal = v.get("mean_accepted_length")
        out.append((f"{name} drafts", f"{v['rounds']} rounds ({share}), acceptance "
                    f"{'-' if acc is None else f'{acc:.1%}'}, "
                    f"{'-' if mal is None else f'{mal:.2f}'} accepted per round"))
    out.extend(("guard", line) for line in guard_lines(per))
    return out


# A one-shot chat without --profile starts where the app does (core.settings.first_run_settings).
CHAT_DEFAULTS = first_run_settings()


def chat_settings(args: argparse.Namespace) -> Settings:
    """The settings of a one-shot chat: --profile NAME[:key=value,...]'s (else CHAT_DEFAULTS),
    the flags given on top (core.flags: the app's and the bench's flags)."""
    from core.flags import command_settings

    spec = getattr(args, "profile", None)
    changes = flag_changes(args)
    temperature = changes.get("temperature")
    # A temperature alone picks its rule (T = 0 greedy, else lossless); a profile keeps its
    # own, and a --rule or --tv given says which the user wants.
    if temperature is not None and not spec and not {"rule", "tv_budget"} & set(changes):
        rule = "greedy" if temperature == 0 else "lossless"
        args = argparse.Namespace(**{**vars(args), "rule": rule})
    return command_settings(args, CHAT_DEFAULTS)[1]


def prepare_chat(engine: Any, settings: Settings, prompt_tokens: int, label: str,
                 say: Callable[[str], None], progress: Any = None,
                 max_rows: int | None = None) -> Any:
    """Before a one-shot chat's first round: its curve when the policy needs one (the one kept
    for this pair and machine, else measured after a full warm-up of its rows and kept), then
    a warm-up of only what the first rounds use (core.runtime.warmer.Warmer): later sizes
    compile at their first use, after the first token. Sharded, every rank warms and
    measures everything, as they must run the same forwards. `max_rows` (a narrow start,
    core/runtime/warm_start.py) bounds the calibration's rows. Returns the curve's CurveResult
    (None when the run needs none)."""
    from core.runtime.warmer import Warmer
    from core.runtime.warmup import warm_up_engine

    result = None
    if getattr(engine, "spmd", None) is not None:
        warm_up_engine(engine, [settings], prompt_tokens=prompt_tokens, label=label)
        return None
    if engine.needs_curve(settings):
        import time

        from core.runtime.calibration import curve_for

        began = time.monotonic()
        result = curve_for(engine, settings, context=max(prompt_tokens, 16), label=label,
                           progress=progress, max_rows=max_rows)
        for notice in result.notices:
            say(notice)
        if result.kept is not None:
            say(f"calibration kept from {result.kept.when()} reused ({result.kept.path})")
        else:
            say(f"calibrated in {time.monotonic() - began:.1f} s" + " " * 40)
    # in the run's own chunks (a narrow start's are small: core/runtime/warm_start.py)
    Warmer(engine, label=label, chunk=settings.prefill_chunk).first_round(settings, prompt_tokens)
    return result


def run_chat_cli(args: argparse.Namespace) -> int:
    """Load the pair, answer one prompt with colour by origin, print the summary."""
    from core.decode.engine import Engine
    from core.models import chat_prompt_ids, check_request, load_pair, pair_context_window
    from core.runtime.distributed import current_spmd

    spmd = current_spmd()  # launched over ranks: the target sharded, rank 0 alone prints
    err = Console(stderr=True)
    out = Console()
    prompt = prompt_text(args.prompt)  # before loading: a bad prompt costs no model load
    settings = chat_settings(args)
    # A spinner on a terminal, one line into a log: a first-use log's stamps then tell the
    # imports before it from the load after it (docs/benchmarks/first-use.md).
    loading = Waiting(err, f"loading {settings.target} + {settings.draft}")
    try:
        load = load_pair if spmd is None else spmd.load_pair
        pair = load(settings.target, settings.draft, progress=True)
    finally:
        loading.stop()
    if pair.target.random_weights:
        err.print("[yellow]random-weight model: the text below is noise[/]")
    tok = pair.target.tokenizer
    ids = chat_prompt_ids(tok, [{"role": "user", "content": prompt}], model=pair.target.name,
                          specials_in_text=getattr(args, "special_tokens_in_text", False),
                          notice=lambda t: err.print(Text(t, style="yellow")))
    check_request(len(ids), settings.max_tokens, pair_context_window(pair), pair.target.name)
    engine = Engine.from_pair(pair) if spmd is None else spmd.engine(pair)
    # First use on a GPU compiles kernels (minutes on a fresh CUDA machine): said, not silent,
    # and only what the first rounds use before the first token. Where the matrix
    # kernels are not compiled yet, every forward stays below them (core/runtime/warm_start.py).
    from core.runtime.compile_watch import notices_to
    from core.runtime.warm_start import narrow_start, narrowed

    narrow = None
    if spmd is None:
        narrow = narrow_start([engine.target_model, getattr(engine, "draft_model", None)])
    if narrow is not None:
        settings = narrowed(settings, narrow)
        err.print(Text(narrow.text(), style="yellow"))
    with notices_to(lambda n: err.print(Text(n.text, style="yellow"))):
        prepare_chat(engine, settings, len(ids), pair.target.name,
                     lambda text: err.print(Text(text, style="yellow")),
                     progress=calibration_progress(err),
                     max_rows=narrow.rows if narrow else None)
    err.print(legend())
    detok = tok.detokenizer
    detok.reset()
    summary, rounds = None, []
    waiting = Waiting(err, f"prefilling {len(ids):,} prompt tokens")
    try:
        for item in engine.generate(ids, settings):
            waiting.stop()
            if isinstance(item, RoundEvent):
                rounds.append(item)
                for t in item.tokens:
                    if t.id in pair.eos_ids:
                        continue
                    detok.add_token(t.id)
                    out.print(Text(detok.last_segment, style=ORIGIN_STYLE[t.origin]), end="")
            else:
                summary = item
    finally:  # ctrl+c in the prefill: the spinner goes before "interrupted" is said
        waiting.stop()
    detok.finalize()
    out.print(Text(detok.last_segment))
    if summary is not None:
        err.print(summary_table(summary, rounds))
    sys.stdout.flush()
    return 0
