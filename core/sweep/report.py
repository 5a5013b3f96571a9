"""A sweep's renderings: the cells' table (terminal, CSV, Markdown), the frontier as a terminal
plot and as an SVG, and the texts side by side.

All of them read the JSON dict `SweepRun.to_dict()` returns (or a file of it), never the live
objects: what a reader sees is what the raw file says. The SVG is written by hand (a few dozen
elements): no plotting dependency for one picture.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape as xml_escape

from core.bench.fmt import pct

CSV_COLUMNS = (
    "id", "temperature", "kind", "source", "policy", "tv", "prompt", "speedup", "speedup_min",
    "speedup_max", "acceptance", "per_position_acceptance", "nll_delta", "tv_per_token",
    "mean_tv", "copied", "repetition", "task_success", "on_front",
)
# One colour per temperature group (SVG) and its terminal style.
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
STYLES = ("cyan", "red", "green", "magenta", "yellow", "blue")


def _f(v: Any, digits: int = 2, suffix: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{digits}f}{suffix}"


def speed_text(c: dict[str, Any]) -> str:
    """'1.13x (0.98-1.30)': the speedup and the range of its paired per-request ratios."""
    if c.get("speedup") is None:
        return "-"
    rng = ""
    if c.get("speedup_min") is not None and c.get("speedup_max") is not None:
        rng = f" ({c['speedup_min']:.2f}-{c['speedup_max']:.2f})"
    return f"{c['speedup']:.2f}x{rng}"


def _positions(c: dict[str, Any], n: int = 8) -> str:
    rates = c.get("per_position_acceptance") or []
    text = " ".join(f"{r:.2f}" for r in rates[:n])
    return text + (" ..." if len(rates) > n else "") if text else "-"


def nll_text(c: dict[str, Any], data: dict[str, Any]) -> str:
    """The NLL given up, '!' after it where the cell copies more of the prompt than
    target-only (its NLL then reads low for the wrong reason: the target finds its prompt
    likely)."""
    groups = (data.get("frontier") or {}).get("groups") or {}
    untrusted = {i for g in groups.values() for i in g.get("nll_untrusted") or []}
    return _f(c.get("nll_delta"), 3) + (" !" if c["id"] in untrusted else "")


def excluded_lines(data: dict[str, Any]) -> list[str]:
    """Why each cell is not recommended: 'T=0.7 hybrid fixed-8 TV=1 not recommended: copies
    the prompt: 91% against 12%'."""
    out = []
    for g in ((data.get("frontier") or {}).get("groups") or {}).values():
        for cid, why in (g.get("excluded") or {}).items():
            out.append(f"{cid} not recommended: {why}")  # the id names its temperature
    return out


def recommended_ids(data: dict[str, Any]) -> set[str]:
    groups = (data.get("frontier") or {}).get("groups") or {}
    return {g["recommended"] for g in groups.values() if g.get("recommended")}


# -- table: terminal, CSV ---------------------------------------------------------------------


def print_cells(data: dict[str, Any], console: Any) -> None:
    """The cells as a rich table, the front marked, then each temperature's recommendation."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    rec = recommended_ids(data)
    # Two tables, speed and what the text gave up, not one of eleven columns: at 80 columns
    # the one table squeezed the cell's name out and cut the headers.
    speed = Table(title="sweep: speed", title_justify="left", box=box.SIMPLE_HEAD,
                  collapse_padding=True, pad_edge=False)
    reads = Table(title="sweep: what the text gave up", title_justify="left",
                  box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    for table, cols in ((speed, ("", "T", "cell", "speedup", "min-max", "accept")),
                        (reads, ("", "T", "cell", "NLL +", "TV/tok", "copied", "repeat",
                                 "task"))):
        for col in cols:
            table.add_column(col, overflow="fold", no_wrap=col != "cell",
                             min_width=14 if col == "cell" else None,
                             ratio=1 if col == "cell" else None)
    share = lambda v: "-" if v is None else f"{v:.0%}"  # noqa: E731
    for c in data.get("cells", []):
        mark = Text(("R" if c["id"] in rec else "") + ("*" if c.get("on_front") else ""),
                    style="bold green")
        head = (mark, f"{c.get('temperature', 0):g}", Text(c["name"]))
        lo, hi = c.get("speedup_min"), c.get("speedup_max")
        speed.add_row(*head, _f(c.get("speedup"), 2, "x"), f"{_f(lo)}-{_f(hi)}",
                      share(c.get("acceptance")))
        reads.add_row(*head, nll_text(c, data), _f(c.get("tv_per_token"), 3),
                      share(c.get("copied")), share(c.get("repetition")),
                      share(c.get("task_success")))
    console.print(speed)
    console.print(reads)
    console.print(Text("NLL +: the target's NLL per token given up against target-only (same "
                       "seeds), ! where the cell copies more of the prompt than target-only (a "
                       "copy is likely under the target: not to be trusted); TV/tok: the "
                       "realised TV per output token; copied: share of the text in runs of 8+ "
                       "tokens repeating the prompt; repeat: share of repeated 4-grams; * on "
                       "the Pareto front; R recommended within the bounds", style="dim"))
    for line in recommendation_lines(data):
        console.print(Text(line))
    for line in excluded_lines(data):
        console.print(Text(line, style="dim"))


def recommendation_lines(data: dict[str, Any]) -> list[str]:
    """One sentence per temperature: the fastest cell within the bounds, or why none."""
    front = data.get("frontier") or {}
    margin = front.get("margin")
    bounds = ["task success no lower than target-only's"] if margin is not None else []
    if margin is not None:
        bounds.append(f"copying and repetition at most {margin:.0%} above target-only's")
    if front.get("max_nll_delta") is not None:
        bounds.append(f"NLL given up <= {front['max_nll_delta']:g}")
    if front.get("min_task") is not None:
        bounds.append(f"task success >= {front['min_task']:.0%}")
    if front.get("allow"):
        bounds.append("allowing " + ", ".join(front["allow"]))
    within = " within " + ", ".join(bounds) if bounds else " (no bound given)"
    cells = {c["id"]: c for c in data.get("cells", [])}
    out = []
    for key, g in (front.get("groups") or {}).items():
        rec = g.get("recommended")
        if rec is None:
            out.append(f"T={key}: no recommendation{within}: {g.get('why_none')}")
            continue
        c = cells.get(rec, {})
        out.append(f"T={key}: fastest{within}: {c.get('name', rec)}, {speed_text(c)}, "
                   f"NLL given up {_f(c.get('nll_delta'), 3)}, task "
                   f"{pct(c.get('task_success'))}, copied {pct(c.get('copied'))}, repeated "
                   f"{pct(c.get('repetition'))}")
    return out


def sweep_csv(data: dict[str, Any]) -> str:
    """One row per cell over all prompts (prompt 'all'), then one per cell and prompt."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)

    def row(c: dict[str, Any], prompt: str, nums: dict[str, Any]) -> list[Any]:
        pos = " ".join(f"{r:.4f}" for r in (c.get("per_position_acceptance") or []))
        vals = {**c, **nums, "prompt": prompt,
                "per_position_acceptance": pos if prompt == "all" else ""}
        return ["" if vals.get(k) is None else vals.get(k) for k in CSV_COLUMNS]

    for c in data.get("cells", []):
        w.writerow(row(c, "all", {}))
    for c in data.get("cells", []):
        for prompt, nums in (c.get("per_prompt") or {}).items():
            w.writerow(row(c, prompt, nums))
    return buf.getvalue()


# -- the frontier as a picture ----------------------------------------------------------------


def _points(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in data.get("cells", [])
            if c.get("speedup") is not None and c.get("nll_delta") is not None]


def _bounds(pts: Sequence[dict[str, Any]]) -> tuple[float, float, float, float]:
    xs = [p["nll_delta"] for p in pts] + [0.0]
    ys = [p["speedup"] for p in pts] + [1.0]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    dx, dy = (x1 - x0) or 1.0, (y1 - y0) or 1.0
    return x0 - 0.05 * dx, x1 + 0.05 * dx, y0 - 0.08 * dy, y1 + 0.08 * dy


def frontier_svg(data: dict[str, Any], title: str = "Speed against NLL given up") -> str:
    """The frontier: x the NLL given up per token, y the speedup over target-only; one colour
    per temperature, the Pareto front joined and its points filled, the recommendation ringed,
    target-only's speed as a dashed line."""
    W, H, L, R, T, B = 720, 460, 70, 200, 40, 50
    pts = _points(data)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L}" y="22" font-size="14">{xml_escape(title)}</text>']
    if not pts:
        out.append(f'<text x="{L}" y="{H / 2}">no cell was measured on both axes yet</text>')
        return "\n".join(out + ["</svg>"]) + "\n"
    x0, x1, y0, y1 = _bounds(pts)
    pw, ph = W - L - R, H - T - B

    def sx(x: float) -> float:
        return L + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return T + ph - (y - y0) / (y1 - y0) * ph

    out.append(f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    for i in range(5):  # ticks
        xv, yv = x0 + (x1 - x0) * i / 4, y0 + (y1 - y0) * i / 4
        out.append(f'<text x="{sx(xv):.1f}" y="{T + ph + 16}" text-anchor="middle">{xv:.3g}</text>')
        out.append(f'<text x="{L - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">{yv:.2f}x</text>')
    out.append(f'<text x="{L + pw / 2}" y="{H - 12}" text-anchor="middle">NLL given up '
               '(target nats per token, against target-only, same seeds)</text>')
    out.append(f'<text x="16" y="{T + ph / 2}" transform="rotate(-90 16 {T + ph / 2})" '
               'text-anchor="middle">speedup over target-only</text>')
    if y0 <= 1.0 <= y1:
        out.append(f'<line x1="{L}" x2="{L + pw}" y1="{sy(1.0):.1f}" y2="{sy(1.0):.1f}" '
                   'stroke="#999" stroke-dasharray="4 3"/>')
    if x0 <= 0.0 <= x1:  # nothing given up: target-only's text
        out.append(f'<line x1="{sx(0.0):.1f}" x2="{sx(0.0):.1f}" y1="{T}" y2="{T + ph}" '
                   'stroke="#999" stroke-dasharray="4 3"/>')
    rec = recommended_ids(data)
    groups = (data.get("frontier") or {}).get("groups") or {}
    temps = list(dict.fromkeys(p.get("temperature", 0.0) for p in pts))
    for gi, t in enumerate(temps):
        col = COLOURS[gi % len(COLOURS)]
        front = groups.get(f"{t:g}", {}).get("front", [])
        fp = sorted((p for p in pts if p["id"] in front), key=lambda p: p["nll_delta"])
        if len(fp) > 1:
            path = " ".join(f"{sx(p['nll_delta']):.1f},{sy(p['speedup']):.1f}" for p in fp)
            out.append(f'<polyline points="{path}" fill="none" stroke="{col}" stroke-width="1.5"/>')
        for p in pts:
            if p.get("temperature", 0.0) != t:
                continue
            x, y, on = sx(p["nll_delta"]), sy(p["speedup"]), p["id"] in front
            fill = col if on else "white"
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{5 if on else 4}" fill="{fill}" '
                       f'stroke="{col}" stroke-width="1.5"><title>{xml_escape(p["id"])}: '
                       f'{p["speedup"]:.3f}x, NLL {p["nll_delta"]:+.4f}</title></circle>')
            if p["id"] in rec:
                out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="9" fill="none" stroke="black"/>')
            out.append(f'<text x="{x + 7:.1f}" y="{y - 6:.1f}" font-size="9" fill="#333">'
                       f'{xml_escape(p["name"])}</text>')
        ly = T + 14 + gi * 18
        out.append(f'<circle cx="{W - R + 20}" cy="{ly - 4}" r="5" fill="{col}"/>')
        out.append(f'<text x="{W - R + 32}" y="{ly}">T = {t:g}, filled: front</text>')
    ly = T + 14 + len(temps) * 18
    out.append(f'<circle cx="{W - R + 20}" cy="{ly - 4}" r="9" fill="none" stroke="black"/>')
    out.append(f'<text x="{W - R + 32}" y="{ly}">recommended</text>')
    return "\n".join(out + ["</svg>"]) + "\n"


def frontier_plot(data: dict[str, Any], width: int = 60, height: int = 16) -> Any:
    """The same frontier in the terminal: a character grid (x NLL given up, y speedup), each
    cell a letter keyed in the legend below, front cells bold, the recommendation reversed."""
    from rich.console import Group
    from rich.text import Text

    pts = _points(data)
    if not pts:
        return Text("no cell was measured on both axes yet")
    x0, x1, y0, y1 = _bounds(pts)
    grid: list[list[tuple[str, str]]] = [[(" ", "")] * width for _ in range(height)]
    if y0 <= 1.0 <= y1:
        r1 = height - 1 - round((1.0 - y0) / (y1 - y0) * (height - 1))
        grid[r1] = [("·", "dim")] * width
    rec = recommended_ids(data)
    temps = list(dict.fromkeys(p.get("temperature", 0.0) for p in pts))
    keys = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    legend = []
    for i, p in enumerate(pts):
        key = keys[i % len(keys)]
        col = round((p["nll_delta"] - x0) / (x1 - x0) * (width - 1))
        row = height - 1 - round((p["speedup"] - y0) / (y1 - y0) * (height - 1))
        style = STYLES[temps.index(p.get("temperature", 0.0)) % len(STYLES)]
        if p.get("on_front"):
            style += " bold"
        if p["id"] in rec:
            style += " reverse"
        grid[row][col] = (key, style)
        legend.append((key, style, p))
    lines = []
    for r, cells in enumerate(grid):
        yv = y1 - (y1 - y0) * r / (height - 1)
        line = Text(f"{yv:6.2f}x |" if r % 4 == 0 else "        |")
        for ch, st in cells:
            line.append(ch, style=st)
        lines.append(line)
    lines.append(Text("        +" + "-" * width))
    lines.append(Text(f"         {x0:<.3g}".ljust(width // 2 + 9) + f"{x1:.3g}".rjust(width // 2)))
    lines.append(Text("         x: NLL given up per token; y: speedup over target-only (· = 1x)",
                      style="dim"))
    for key, style, p in legend:
        t = Text(f"  {key} ", style=style)
        t.append(f"{p['id']}: {p['speedup']:.2f}x, NLL {p['nll_delta']:+.3f}"
                 + (" (front)" if p.get("on_front") else ""))
        lines.append(t)
    return Group(*lines)


# -- Markdown ---------------------------------------------------------------------------------


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", "<br>")


def sweep_markdown(data: dict[str, Any], svg_name: str | None = None) -> str:
    """The page: what ran (models by name and sha256, machine, MLX, command), the cells, the
    frontier picture and the recommendation, then per prompt the texts side by side."""
    out = ["# Sweep: speed against what the TV budget gives up\n"]
    if not data.get("complete"):
        out.append(f"**Partial**: {data.get('blocks_done')} of {data.get('blocks_planned')} "
                   "blocks (prompt x temperature) finished; the cells cover those.\n")
    if data.get("command"):
        out.append(f"Command: `{scrub_paths(data['command'], data)}`\n")
    out += provenance_lines(data)
    p = data.get("protocol") or {}
    out.append(f"Protocol (core/bench/protocol.py, one run per prompt and temperature): "
               f"{p.get('tokens')} new tokens per request with EOS ignored, {p.get('warmup')} "
               f"warm-up request(s) per cell, then {p.get('invocations')} invocations x "
               f"{p.get('seeds')} seeds, every cell's requests from an empty cache; speedup = "
               "target-only's median E2E over the cell's on the same prompt (geometric mean "
               "over prompts), its range the paired per-request ratios (same seed, same "
               "invocation); NLL given up = the target's NLL per token of the cell's text "
               "minus target-only's for the same seeds (mean over prompts); task = share of "
               "the outputs whose prompt check passed.\n")
    out.append(f"Prompts: {', '.join(data.get('prompts') or [])}.\n")
    scored = (p.get("seeds") or 0) * (p.get("tokens") or 0)
    out.append(f"Each cell's NLL is over {scored} generated tokens a prompt (its first "
               "invocation's seeds): one sampled text per seed, so at a few seeds a difference "
               "of a few tenths between cells can be the sample, not the setting; read the "
               "texts.\n")
    rec = recommended_ids(data)
    out.append("| | cell | speedup (min-max) | acceptance | per-position acceptance | "
               "NLL given up | TV per token | TV per judged draft | copied | repeated | task |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in data.get("cells", []):
        mark = ("**R**" if c["id"] in rec else "") + (" *" if c.get("on_front") else "")
        out.append(f"| {mark} | {_md(c['id'])} | {speed_text(c)} | {pct(c.get('acceptance'))} | "
                   f"{_positions(c)} | {nll_text(c, data)} | {_f(c.get('tv_per_token'), 3)} | "
                   f"{_f(c.get('mean_tv'), 3)} | {pct(c.get('copied'))} | "
                   f"{pct(c.get('repetition'))} | {pct(c.get('task_success'))} |")
    out.append("\n`*` on the Pareto front of its temperature (no cell is both faster and gives "
               "up less); **R** the fastest cell within the bounds.\n")
    for line in recommendation_lines(data):
        out.append(f"- {line}")
    out.append("")
    excluded = excluded_lines(data)
    if excluded:
        out.append("Not recommended, and why:\n")
        out += [f"- {line}" for line in excluded]
        out.append("")
    out.append("NLL given up marked `!`: the cell copies more of the prompt than target-only, "
               "and the target finds its own prompt likely, so a low or negative NLL given up "
               "there is not to be trusted; read its copied share, task and text. Copied: the "
               "share of the text's tokens in runs of 8 or more that repeat the prompt; "
               "repeated: the share of its 4-grams that repeat an earlier one; TV per token: "
               "the realised total-variation distance from the target's distribution, per "
               "output token (a token the target drew itself moved 0); TV per judged draft: "
               "the same over the positions where a draft was judged.\n")
    if svg_name:
        out.append(f"![the frontier: speed against NLL given up]({svg_name})\n")
    out += texts_markdown(data)
    return "\n".join(out) + "\n"


def display_spec(spec: str) -> str:
    """A model spec as a page may print it: a file path by its file name (no machine's paths in
    a page), a hub id, shape or self-draft as given."""
    if spec.startswith(("/", "~", ".")) or spec.count("/") > 1 or "\\" in spec:
        return spec.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return spec


def scrub_paths(text: str, data: dict[str, Any]) -> str:
    """`text` with the models' file paths replaced by their file names."""
    ids = ((data.get("models") or {}).get("identities") or {}).values()
    for d in ids:
        if isinstance(d, dict) and d.get("spec"):
            text = text.replace(d["spec"], display_spec(d["spec"]))
    return text


def provenance_lines(data: dict[str, Any]) -> list[str]:
    """Models by name and sha256 (or shape and seed), the machine, MLX and the tool's commit."""
    from core.identity import ModelIdentity
    from core.version import version_text

    out = []
    identities = (data.get("models") or {}).get("identities") or {}
    for role in ("target", "draft"):
        d = identities.get(role)
        if isinstance(d, dict):
            m = ModelIdentity.from_dict({**d, "spec": display_spec(str(d.get("spec", "")))})
            out.append(f"- {role}: {m.summary()}")
    env = data.get("environment") or {}
    if env:
        out.append(f"- machine: {env.get('backend', '?')} ({env.get('device_name') or '-'}), "
                   f"{env.get('os', '?')}; mlx {env.get('mlx', '?')}, mlx-lm "
                   f"{env.get('mlx_lm', '?')}; measured by {version_text(env)}")
    return out + [""] if out else out


def texts_markdown(data: dict[str, Any]) -> list[str]:
    """Per prompt and temperature: target-only's text, draft-only's and each TV budget's of
    the first policy of the grid, all for the same seed."""
    grid = data.get("grid") or {}
    policies = grid.get("policies") or []
    first = policies[0] if policies else None
    out = ["## Texts side by side\n",
           f"The same seed for every row; speculative rows at {first} (the grid's first "
           "policy); the other cells' texts are in the JSON.\n"]
    sources = grid.get("sources") or ["model"]
    cells = {(c.get("temperature"), c["name"]): c for c in data.get("cells", [])}

    def shown(t: float, name: str) -> bool:
        c = cells.get((t, name))
        if c is None or c.get("kind") != "speculative":
            return True
        return c.get("policy") == first and c.get("source") == sources[0]

    for block in data.get("texts") or []:
        rows = [r for r in block.get("rows", []) if shown(block["temperature"], r["name"])]
        if not rows:
            continue
        seed = next((r.get("seed") for r in rows if r.get("seed") is not None), None)
        out.append(f"### {block['prompt']}, T = {block['temperature']:g} (seed {seed})\n")
        out.append("| row | text |")
        out.append("|---|---|")
        for r in rows:
            out.append(f"| {_md(r['name'])} | {_md(r.get('text') or '')} |")
        out.append("")
    return out
