"""first-use.md's tables: the probe's kernels per step, the stamped logs of a first chat, and
the CLI's import times."""

from __future__ import annotations

import re
from collections.abc import Sequence

from bench_tables.never_slower import _met
from bench_tables.rows import Doc
from core.bench.report import md_table, num


def _kernel_kinds(names: Sequence[str]) -> str:
    """A step's new kernel-cache files, by kernel (the .ptx of each; .cu and .txt are its
    source and log): qmm tiles by name, the fused elementwise kernels counted."""
    ptx = [n.removesuffix(".ptx") for n in names if n.endswith(".ptx")]
    named = sorted(n.removesuffix("_affine") for n in ptx if not n.startswith("CV2"))
    fused = len(ptx) - len(named)
    return ", ".join(named + ([f"{fused} fused elementwise"] if fused else [])) or "-"


def first_probe(docs: list[Doc]) -> tuple[list[str], str]:
    """first_probe.py's steps, a row each: seconds and the kernels each added, per variant."""
    variants = [v for d in docs for v in ((d.get("variants") or {}).values() or [d])]
    steps: list[str] = []
    for v in sorted(variants, key=lambda v: -len(v.get("steps") or [])):  # the longest's order
        steps += [s["step"] for s in v.get("steps") or [] if s["step"] not in steps]
    out = []
    for name in steps:
        cells = [name]
        for v in variants:
            s = next((x for x in v.get("steps") or [] if x["step"] == name), None)
            cells += ([num(s.get("s"), ".2f"), f"{s.get('kernels_added', 0)} "
                       f"({(s.get('bytes_added') or 0) / 1e6:.1f} MB)",
                       _kernel_kinds(s.get("kernels") or [])] if s else ["-", "-", "-"])
        out.append(cells)
    head = ["Step"]
    for v in variants:
        head += [f"{v.get('variant')}: s", "files added", "kernels among them"]
    return md_table(head, out), (
        "one step at a time on an empty kernel cache (MLX " + str(variants[0].get("mlx", "?"))
        + ", " + str(variants[0].get("device", "?")) + "); files added = new files in the kernel "
        "cache after the step (a kernel is a .ptx, .cu and .txt file), and their size; kernels among "
        "them = the .ptx names the probe listed (qmm = quantized matrix-matrix tiles)")


STAMP = re.compile(r"^\[\s*(?P<s>[\d.]+) s\] (?P<stream>out|err): (?P<text>.*)$")
MILESTONES = (("imports done (\"loading\")", "loading "),
              ("load done (narrow start)", "first use of this GPU"),
              ("calibration reused", "calibration kept from"),
              ("kernels compiled", "compiled GPU kernels"),
              ("calibrated", "calibrated in"),
              ("prefill starts", "prefilling"))


def _stamps(text: str) -> list[tuple[float, str]]:
    return [(float(m["s"]), m["text"]) for line in text.splitlines() if (m := STAMP.match(line))]


def first_use(docs: list[Doc]) -> tuple[list[str], str]:
    """first-use.sh's parts: each milestone's stamp in the part's log (seconds since the
    command started), the first token on stdout and the exit from first-use.json."""
    doc, *logs = docs
    parts = doc.get("parts") or {}
    names = [str(lg.get("name", "")).removeprefix("first-use-").removesuffix(".log")
             for lg in logs]
    out = []
    for label, needle in MILESTONES:
        cells = []
        for lg in logs:
            at = next((s for s, t in _stamps(str(lg.get("text", ""))) if t.startswith(needle)
                       or needle in t[:40]), None)
            cells.append(f"{at:.2f}" if at is not None else "-")
        if any(c != "-" for c in cells):
            out.append([label, *cells])
    for label, key in (("first token on stdout", "first_token_s"), ("exit", "total_s")):
        out.append([label, *(num((parts.get(n) or {}).get(key), ".2f") for n in names)])
    out.append([f"goal: first token <= {doc.get('goal_s', '?'):g} s",
                *(_met((parts.get(n) or {}).get("met")) for n in names)])
    return md_table(("Seconds since the command started", *names), out), (
        "stamps from each part's log (first-use.sh stamps every line); first token and exit "
        "from first-use.json")


IMPORT = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)")


def _imports(text: str) -> list[tuple[int, int, int, str]]:
    """`python -X importtime` lines: (self us, cumulative us, depth, module)."""
    return [(int(m[1]), int(m[2]), len(m[3]) // 2, m[4])
            for line in text.splitlines() if (m := IMPORT.match(line))]


def importtime(docs: list[Doc]) -> tuple[list[str], str]:
    """Where the CLI's imports go: the chain from core.cli down to the heaviest module
    (cumulative s at each link), then the packages by their modules' own time; one column
    per importtime file (without and with bytecode)."""
    runs = [_imports(str(d.get("text", ""))) for d in docs]
    names = [str(d.get("name", "?")).removesuffix(".txt") for d in docs]
    ref = runs[-1]
    # The chain: from the heaviest top-level import, each step the heaviest child (importtime
    # lists a module's children right before it, one level deeper).
    chain: list[str] = []
    idx = max((i for i, x in enumerate(ref) if x[2] == 0), key=lambda i: ref[i][1])
    while True:
        chain.append(ref[idx][3])
        depth, kids, j = ref[idx][2], [], idx - 1
        while j >= 0 and ref[j][2] > depth:
            if ref[j][2] == depth + 1:
                kids.append(j)
            j -= 1
        if not kids or ref[max(kids, key=lambda k: ref[k][1])][1] < 0.5 * ref[idx][1]:
            break
        idx = max(kids, key=lambda k: ref[k][1])

    def cum(run: list[tuple[int, int, int, str]], mod: str) -> str:
        return num(max((c for _, c, _, n in run if n == mod), default=None) and
                   max(c for _, c, _, n in run if n == mod) / 1e6, ".2f")

    def total(run: list[tuple[int, int, int, str]]) -> float:
        return sum(c for _, c, d, _ in run if d == 0) / 1e6

    out = [["all imports", *(f"{total(x):.2f}" for x in runs)]]
    # Markdown strips a cell's leading spaces: the depth is a dot a level
    out += [[f"{'· ' * i}`{m}`", *(cum(x, m) for x in runs)] for i, m in enumerate(chain)]
    own: dict[str, list[float]] = {}
    for k, run in enumerate(runs):
        for s, _, _, n in run:
            own.setdefault(n.split(".")[0], [0.0] * len(runs))[k] += s / 1e6
    top = sorted(own, key=lambda p: -own[p][-1])[:8]
    out += [[f"package `{p}` (own time of its modules)", *(f"{v:.2f}" for v in own[p])]
            for p in top]
    return md_table(("Import (s, cumulative)", *names), out), (
        "python -X importtime of the chat command's imports; chain = from the heaviest top-level "
        "import, each line its heaviest child (a dot a level); packages = the sum of their modules' own (self) "
        "time, the 8 heaviest with bytecode; importtime's own bookkeeping inflates all of it")
