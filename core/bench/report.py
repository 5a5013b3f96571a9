"""The renderings of a benchmark report: the markdown page, the CSV, the terminal table.

Why here and not on the report: people read these, scripts read the JSON; a rendering may
change its layout, the JSON contract may not.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from core.bench.fmt import md_table, num, pct, ratio, secs
from core.bench.provenance import provenance_markdown
from core.bench.results import BenchReport, BenchResult
from core.events import COMM_NOTE, PHASES, phase_label

__all__ = ["md_table", "num", "pct", "ratio", "secs", "print_table", "report_csv",
           "report_markdown", "source_rows"]


OVERHEAD_FLAG = 0.05  # traced over untraced E2E above this: the phase split is distorted


def overhead_flagged(r: BenchResult) -> bool:
    """Whether tracing slowed this row's traced request by more than OVERHEAD_FLAG."""
    return r.tracing_overhead is not None and r.tracing_overhead > OVERHEAD_FLAG


def outside_cells(r: Any) -> tuple[str, str]:
    """A traced request's ms before its first round and between its rounds (a result read
    back without its rounds: all of its time outside rounds, in the first cell)."""
    if r.traced_summary is None or not r.traced_rounds:
        return num(r.outside_rounds_ms, ".1f"), "-"
    from core.events import time_accounting

    parts = time_accounting(r.traced_summary, r.traced_rounds)
    return (f"{parts['before the first round'] * 1e3:.1f}",
            f"{parts['between rounds'] * 1e3:.1f}")


def overhead_cell(r: BenchResult) -> str:
    """The tracing overhead, in bold past OVERHEAD_FLAG."""
    text = pct(r.tracing_overhead)
    return f"**{text}**" if overhead_flagged(r) else text


def _config(r: BenchResult) -> str:
    return r.label if r.label == r.name else f"{r.label} (`{r.name}`)"


def source_rows(r: BenchResult) -> list[tuple[str, ...]]:
    """A row's per-source cells: source, rounds, share, drafts/round, acceptance, accepted len."""
    out = []
    for name, v in r.per_source.items():
        if name == "none":
            out.append(("target steps", str(v["rounds"]), pct(v["share"]), "-", "-", "-"))
            continue
        per_round = v["proposed"] / v["rounds"] if v["rounds"] else None
        out.append((name, str(v["rounds"]), pct(v["share"]), num(per_round, ".1f"),
                    pct(v["acceptance"]), num(v["mean_accepted_length"], ".2f")))
    return out


def guard_rows(r: BenchResult) -> list[tuple[str, ...]]:
    """A guarded row's per-source cells (core.cost.guard): source, measured tok/s (median
    over the timed requests), against target steps (median and min-max), the decisions."""
    out = []
    for name, g in r.guard.items():
        rates = sorted(x for x in g["measured_tok_s"] if x is not None)
        ratios = sorted(x for x in g["vs_target"] if x is not None)
        med = rates[len(rates) // 2] if rates else None
        span = f"{ratio(ratios[len(ratios) // 2])} ({ratios[0]:.2f}-{ratios[-1]:.2f}x)" if ratios else "-"
        said = sorted({str(x) for x in g["guard"] if x is not None})
        out.append(("target steps" if name == "none" else name, num(med, ".0f"),
                    "-" if name == "none" else span, "; ".join(said) or "-"))
    return out


def paired_cells(r: BenchResult) -> tuple[str, str, str, str]:
    """A peer row's paired ratio: median, IQR, min-max, pairs ("-" without pairs)."""
    q = r.paired_ratio
    if q is None:
        return ("-", "-", "-", "0")
    return (ratio(q["median"]), f"{q['q1']:.2f}-{q['q3']:.2f}x", f"{q['min']:.2f}-{q['max']:.2f}x",
            str(q["n"]))


def prediction_section(report: BenchReport) -> list[str]:
    """Predicted against measured, per speculative row, and where the time went when they
    part (core.bench.predicted)."""
    rows = [r for r in report.results if r.prediction]
    if not rows:
        return []
    cal = report.protocol.get("calibration") or {}
    out = ["### Predicted against measured\n"]
    out.append(
        "Predicted: core.cost.prediction's speedup for the row's own per-position acceptance, the k "
        "it proposed round by round, its draft source's price and the verification cost under "
        f"its dispatch (calibration: {cal.get('from', '-')}, context {cal.get('context', '-')}, "
        f"up to {cal.get('rows', '-')} rows, modes {', '.join(cal.get('modes', [])) or '-'}), "
        "against the target-only row's measured step. Measured: the row's decode speedup "
        "(median decode tok/s over target-only's; prefill excluded, as the prediction models "
        "rounds only). Efficiency = measured / predicted.\n"
    )

    def cells(r: BenchResult) -> tuple[str, ...]:
        pr = r.prediction or {}
        ms = f"{pr['seconds_per_round'] * 1e3:.1f} ({pr['draft_s_per_round'] * 1e3:.1f} + " \
             f"{pr['verify_s_per_round'] * 1e3:.1f})"
        best = f"{pr['best_k']} ({ratio(pr['best_speedup'])})"
        return (r.name, f"{pr['mean_k']:.1f}", f"{pr['tokens_per_round']:.2f}", ms,
                ratio(pr["speedup"]), ratio(pr["measured_decode_speedup"]),
                num(r.efficiency, ".2f"), best)

    out += md_table(("Configuration", "mean k", "tokens/round",
                     "predicted ms/round (draft + verify)", "predicted", "measured (decode)",
                     "efficiency", "best k here (predicted)"), map(cells, rows))
    out.append("")
    notes = [r.prediction["diagnosis"] for r in rows if (r.prediction or {}).get("diagnosis")]
    out.extend(f"- {n}" for n in notes)
    if notes:
        out.append("")
    return out


def step_line(r: BenchResult) -> str:
    """Which forward a row ran and the graphs compiled (core/primitives/compiled.py), and
    why a model ran eager under the compiled step."""
    line = f"{r.name}: {r.step} step, {r.graphs} graphs compiled"
    for role, why in sorted(r.eager_because.items()):
        line += f"; the {role} ran eager: {why}"
    return line


def report_markdown(report: BenchReport) -> str:
    """The page docs/benchmarks keeps: the seed's table, then timing, phases, quality, texts."""
    env, p = report.environment, report.protocol
    out: list[str] = []
    cmd = p.get("command")
    out.append("## Benchmark\n")
    if cmd:
        out.append(f"Command: `{cmd}`\n")
    out.append(
        f"Backend {env.get('backend', '?')} ({env.get('device_name') or '-'}), mlx "
        f"{env.get('mlx', '?')}, mlx-lm {env.get('mlx_lm', '?')}, {env.get('os', '?')}, "
        f"{env.get('timestamp', '')}.  "
    )
    if env.get("mlx_env"):
        out.append("MLX variables: " + ", ".join(f"`{k}={v}`" for k, v in env["mlx_env"].items())
                   + ".  ")
    models = p.get("models") or {}
    if models:
        out.append(f"Target {models.get('target')}, draft {models.get('draft')}.  ")
    out.extend(provenance_markdown(report))  # each model in full, and the tool's commit
    prompt = p.get("prompt") or {}
    out.append(
        f"Prompt {prompt.get('name', '-')} ({p['prompt_tokens']} tokens after the chat "
        f"template); {p['tokens']} new tokens per request, EOS ignored; {p['warmup']} warm-up "
        f"request(s) per setting, then {p['invocations']} invocations x {p['seeds']} seeds "
        f"({p['invocations'] * p['seeds']} timed untraced requests per setting, each from an "
        "empty cache); in the first invocation each is followed by a traced request with the "
        "same seed: the pairs give the tracing overhead (median ratio), the first the phase "
        "split.\n"
    )
    out += md_table(
        ("Configuration", "Acceptance", "Avg. rounds/request", "Median E2E latency",
         "vs target-only", "Predicted", "Efficiency"),
        ((_config(r), pct(r.acceptance) if r.speculative else "-",
          num(r.rounds_per_request, ".1f") if r.speculative else "-", secs(r.median_e2e_s),
          ratio(r.speedup_vs_target), ratio(r.predicted_speedup), num(r.efficiency, ".2f"))
         for r in report.results),
    )
    out.append("")
    out.append("Steps: " + "; ".join(step_line(r) for r in report.results) + ".\n")
    out.extend(prediction_section(report))
    out.append("### Timing detail\n")

    def timing(r: BenchResult) -> tuple[str, ...]:
        d = r.to_dict()
        ppa = " ".join(f"{x:.2f}" for x in r.per_position_acceptance) or "-"
        return (r.name, str(r.timed_requests), secs(d["min_e2e_s"]), secs(d["max_e2e_s"]),
                secs(d["ttft_s"]), num(d["decode_tok_s"], ".1f"),
                num(r.mean_accepted_length, ".2f"), ppa)

    out += md_table(("Configuration", "Timed requests", "Min E2E", "Max E2E", "TTFT",
                     "Decode tok/s", "Mean accepted length", "Per-position acceptance"),
                    map(timing, report.results))
    out.append("")
    mixed = [r for r in report.results if len(r.per_source) > 1]
    if mixed:
        out.append("### Per draft source\n")
        out.append("Share: the source's rounds over the setting's speculative rounds (its hit "
                   "rate); target steps are rounds where no source proposed anything.\n")
        out += md_table(("Configuration", "Source", "Rounds", "Share", "Drafts/round",
                         "Acceptance", "Mean accepted length"),
                        ((r.name, *row) for r in mixed for row in source_rows(r)))
        out.append("")
    guarded = [r for r in report.results if r.guard]
    if guarded:
        out.append("### Measured guard\n")
        out.append("Each source's measured rate in its own rounds (tokens per second, end to "
                   "end), against plain target steps in the same request; a source slower "
                   "than target steps is not asked (core/cost/guard.py).\n")
        out += md_table(("Configuration", "Source", "Measured tok/s", "vs target steps",
                         "Decision"),
                        ((r.name, *row) for r in guarded for row in guard_rows(r)))
        out.append("")
    if any(r.phase_ms for r in report.results):
        out.append("### Phase split (ms per request, one traced request)\n")
        # comm (collectives of a sharded target, core/runtime/distributed.py) only when there was some
        shown = [x for x in PHASES if x != "comm"
                 or any((r.phase_ms or {}).get(x, 0.0) > 0 for r in report.results)]
        sharded = "comm" in shown
        if sharded:
            out.append(f"{COMM_NOTE}.\n")
        out.append("The phases, the time before the first round (the prefill) and the time "
                   "between rounds (host work, garbage collection) add up to the traced E2E "
                   "(core.events.time_accounting).\n")
        out += md_table(
            ("Configuration", *(phase_label(x, sharded) for x in shown),
             "before the first round", "between rounds", "traced E2E", "tracing overhead",
             "predicted kernel"),
            ((r.name, *(f"{r.phase_ms.get(x, 0.0):.1f}" for x in shown), *outside_cells(r),
              secs(r.traced_e2e_s), overhead_cell(r), r.kernel or "-")
             for r in report.results if r.phase_ms),
        )
        out.append("")
        over = [r.name for r in report.results if overhead_flagged(r)]
        if over:
            out.append(f"Tracing overhead above {OVERHEAD_FLAG:.0%} (**bold**): {', '.join(over)}; "
                       "its phase split is of a slower run than the untraced requests timed.\n")
    out.append("### What was given up\n")
    out.append(f"NLL basis: {p['nll_basis']}. The baseline is target-only with the same "
               "temperature, top-p and repetition penalty, same seeds.\n")
    checked = p.get("task_check")
    if checked:
        out.append(f"Task success: the share of each row's outputs (text before the first EOS) "
                   f"that pass the prompt's check ({checked}).\n")
    out.append(f"{TV_NOTE}\n")
    out += md_table(
        ("Configuration", "Target NLL/token", "Target-only NLL/token", "Difference",
         "TV per token", "TV per judged draft", "Copied", "Repeated",
         *(("Task success",) if checked else ()), "Greedy match"),
        ((r.name, num(r.target_nll), num(r.target_nll_baseline), nll_cell(r, report),
          num(r.tv_per_token), num(r.mean_tv), pct(r.copied), pct(r.repetition),
          *((pct(r.task_success),) if checked else ()),
          "-" if r.greedy_match is None else ("yes" if r.greedy_match else "**no**"))
         for r in report.results),
    )
    out.append("")
    for r in report.results:
        d = r.divergence
        if d is not None:
            out.append(
                f"- {r.name}: first divergence from target-only at generated token {d.position} "
                f"(seed {d.seed}): target-only {d.target_only_token} {d.target_only_text!r}, "
                f"this setting {d.speculative_token} {d.speculative_text!r}; target logit "
                f"margin {num(d.logit_margin, '.4f')}."
            )
    peers = [r for r in report.results if r.engine != "specdec-tui"]
    if peers:
        who = peers[0].engine
        what = {"transformers-pld": "the same GGUF dequantized",
                "transformers-assisted": "the same GGUFs dequantized, the draft as "
                "assistant_model"}.get(who, "same models")
        out.append(f"\n### Against {who} (greedy, {what}, same protocol)\n")
        out.append(
            f"Paired: each of {who}'s requests ran right after one of ours with the same seed "
            f"(ABAB...); a pair's ratio is our speed over {who}'s (its E2E over ours), so a "
            "ratio range that stays on one side of 1.00x is not the host's noise.\n"
        )

        def paired(r: BenchResult) -> tuple[str, ...]:
            ours = next((o for o in report.results if o.name == r.peer_of), None)
            return (r.name, secs(r.median_e2e_s), r.peer_of or "-",
                    secs(ours.median_e2e_s if ours else None), ratio(r.ours_vs_peer),
                    *paired_cells(r))

        out += md_table((f"{who} row", "its median E2E", "ours", "our median E2E",
                         f"ours vs {who} (medians)", f"paired ours/{who}: median", "IQR",
                         "min-max", "pairs"), map(paired, peers))
    with_text = [r for r in report.results if r.outputs]
    if with_text:
        seed = next(iter(with_text[0].outputs))
        out.append(f"\n### Outputs side by side (seed {seed}, first timed invocation)\n")
        for r in with_text:
            text = r.sample_text or " ".join(map(str, next(iter(r.outputs.values()))))
            out.append(f"**{r.label}** (`{r.name}`)\n")
            out.append("\n".join("> " + line for line in text.splitlines() or [""]))
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def nll_cell(r: BenchResult, report: BenchReport) -> str:
    """The NLL difference, '!' after it where the row copies more of the prompt than
    target-only (by core.bench.copying.NLL_COPY_TOLERANCE): the target finds its prompt likely."""
    from core.bench.copying import NLL_COPY_TOLERANCE

    base = next((b for b in report.results if b.settings.get("mode") == "target-only"), None)
    flag = (r.copied is not None and base is not None and base.copied is not None
            and r.copied > base.copied + NLL_COPY_TOLERANCE)
    return num(r.nll_delta, "+.3f") + (" !" if flag else "")


TV_NOTE = (
    "TV per token: the realised total-variation distance from the target's distribution of the "
    "distribution each output token was drawn from, averaged over every generated token (a "
    "token the target drew itself moved 0). TV per judged draft: the same distance averaged "
    "over the positions where a draft was judged only (accepted drafts and the one rejected); "
    "none for greedy rows. Copied: the share of the answers' tokens (up to EOS) in runs of 8 "
    "or more that repeat the prompt; repeated: the share of their 4-grams that repeat an "
    "earlier one. A difference marked ! is of a row that copies more of the prompt than "
    "target-only: the target finds its own prompt likely, so its NLL reads low for the wrong "
    "reason"
)


CSV_COLUMNS = (
    "name", "label", "engine", "mode", "rule", "tv_budget", "k", "policy", "draft_source",
    "temperature",
    "top_p", "repetition_penalty", "bonus", "dispatch", "verify_attention", "timed_requests",
    "acceptance", "rounds_per_request", "mean_accepted_length", "median_e2e_s", "min_e2e_s",
    "max_e2e_s", "ttft_s", "decode_tok_s", "speedup_vs_target",
    *(f"{p}_ms" for p in PHASES), "outside_rounds_ms", "traced_e2e_s", "tracing_overhead", "kernel",
    "target_nll", "target_nll_baseline", "mean_tv", "tv_per_token", "task_success",
    "greedy_match", "ours_vs_peer",
    "predicted_speedup", "efficiency", "paired_ratio_median", "paired_ratio_q1",
    "paired_ratio_q3", "paired_ratio_min", "paired_ratio_max", "paired_ratio_n",
    "target", "draft", "target_sha256", "draft_sha256",
)


def report_csv(report: BenchReport) -> str:
    """One flat line per row (CSV_COLUMNS), for spreadsheets; blank where unmeasured."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in report.results:
        d = r.to_dict()
        s = r.settings
        flat = {**d, **d["quality"], **{k: s.get(k) for k in CSV_COLUMNS if k in s}}
        for p in PHASES:
            flat[f"{p}_ms"] = (r.phase_ms or {}).get(p)
        for k, v in (r.paired_ratio or {}).items():
            if k != "pairs":
                flat[f"paired_ratio_{k}"] = v
        for role, m in (r.models or {}).items():
            flat[f"{role}_sha256"] = m.sha256 if m is not None else None
        w.writerow(["" if flat.get(c) is None else flat.get(c) for c in CSV_COLUMNS])
    return buf.getvalue()


def print_table(report: BenchReport, console: Any) -> None:
    """The terminal table: the seed's columns plus what was given up.

    Configuration names come from the user's --profile specs: text, never markup.
    """
    from rich import box
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    # Two tables of eight columns, not one of fifteen: at 100 columns the one table cut its
    # headers and numbers ("accepta…", "13.713-…"); the names wrap, nothing ends in "…".
    speed = Table(title="benchmark: speed", title_justify="left", box=box.SIMPLE_HEAD,
                  collapse_padding=True, pad_edge=False)
    cost = Table(title="benchmark: what it gave up, and the prediction", title_justify="left",
                 box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    # Headers on two lines where that keeps a column narrow: 80 columns hold either table.
    for table, cols in ((speed, ("configuration", "accept", "rounds\n/req", "E2E\nmedian",
                                 "E2E\nmin-max", "TTFT", "tok/s", "vs\ntarget")),
                        (cost, ("configuration", "predicted", "effic-\niency", "NLL Δ",
                                "TV/\ntoken", "task", "greedy", "kernel"))):
        for col in cols:
            # the name wraps (at spaces); numbers and headers stay whole
            if col == "configuration":
                table.add_column(col, overflow="fold", min_width=16, ratio=1)
            else:
                table.add_column(col, no_wrap=True)
    for r in report.results:
        d = r.to_dict()
        diff = r.nll_delta
        gm = "-" if r.greedy_match is None else ("yes" if r.greedy_match else "[red]no[/red]")
        speed.add_row(
            Text(r.name),
            pct(r.acceptance),
            num(r.rounds_per_request, ".1f") if r.speculative else "-",
            secs(r.median_e2e_s),
            f"{num(d['min_e2e_s'])}-{num(d['max_e2e_s'])}",
            secs(d["ttft_s"]),
            num(d["decode_tok_s"], ".1f"),
            ratio(r.speedup_vs_target),
        )
        cost.add_row(
            Text(r.name),
            ratio(r.predicted_speedup),
            num(r.efficiency, ".2f"),
            num(diff, "+.3f"),
            num(r.tv_per_token),
            pct(r.task_success),
            gm,
            r.kernel or "-",
        )
    console.print(speed)
    table = cost
    console.print(table)
    over = [f"{r.name} {pct(r.tracing_overhead)}" for r in report.results if overhead_flagged(r)]
    if over:
        console.print(Text(f"tracing overhead above {OVERHEAD_FLAG:.0%}: " + ", ".join(over)
                           + " (their phase splits are of slower runs)", "yellow"))
    mixed = [r for r in report.results if len(r.per_source) > 1]
    if mixed:
        by_source = Table(title="per draft source (share: of the speculative rounds)",
                          title_justify="left")
        for col in ("configuration", "source", "rounds", "share", "drafts/round", "acceptance",
                    "mean accepted length"):
            by_source.add_column(col, no_wrap=col == "configuration")
        for r in mixed:
            for row in source_rows(r):
                by_source.add_row(Text(r.name), *row)
        console.print(by_source)
    peers = [r for r in report.results if r.paired_ratio is not None]
    if peers:
        paired = Table(title="against mlx-lm, paired request by request (ours/mlx-lm speed)",
                       title_justify="left")
        for col in ("mlx-lm row", "ours", "median", "IQR", "min-max", "pairs"):
            paired.add_column(col, no_wrap=col == "mlx-lm row")
        for r in peers:
            paired.add_row(Text(r.name), Text(r.peer_of or "-"), *paired_cells(r))
        console.print(paired)
    for r in report.results:
        diagnosis = (r.prediction or {}).get("diagnosis")
        if diagnosis:
            console.print(Text(diagnosis, style="yellow"))  # names are text, not markup
        if r.fallback_reason:
            console.print(f"[yellow]{escape(r.name)}: {escape(r.fallback_reason)}[/yellow]")
        console.print(Text(step_line(r), style="dim"))
        if r.divergence is not None:
            dv = r.divergence
            console.print(
                f"[yellow]{escape(r.name)}: greedy output left target-only's at token {dv.position} "
                f"({dv.target_only_token} vs {dv.speculative_token}, margin "
                f"{num(dv.logit_margin, '.4f')})[/yellow]"
            )
