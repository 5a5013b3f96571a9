"""Where the H200 host's noise comes from, and whether placing the process removes it (issue 28).

Run 3 of docs/benchmarks/never-slower.md timed target-only against itself (the A/A control):
its median ratio spanned 0.78-1.64x over 18 benches, identical requests of 256 tokens took
1.0 or 1.6 s, so a 0.97x floor could not be judged. The default model is host-bound there
(a 135M step is a few ms of Python and kernel launches), so a request's time is the host's:
the CPU it runs on, what else runs there, the NUMA node against the GPU's. This probe runs the
same A/A bench (the bench CLI's own JSON: target-only and target-only again, interleaved by
seed) in fresh processes under several placements, round-robin, and keeps each worker's
context switches and the GPU's clocks beside its times.

Placements: `free` (the process as the bench runs it now), `local4` (pinned to 4 CPUs of the
GPU's NUMA node, from the PCI device's local_cpulist, intersected with the CPUs allowed),
`local4-nogc` (the same with Python's collector off during the bench), `core2` (2 CPUs).

    python3 docs/benchmarks/h200/noise.py OUT_DIR     (on the device; ~6 min: 12 workers of ~30 s)

Environment: TARGET (default; shape:tiny for a CPU smoke run), ROUNDS (3), SEEDS (3), TOKENS (256), PROMPT (creative-seed-vault),
TEMPERATURE (0.0; not TEMP, which names the temporary folder MLX compiles in),
PLACEMENTS ("free local4 local4-nogc core2"). Works in /tmp/noise-work: host.txt (the
machine's CPUs, NUMA nodes and GPU topology), <placement>-r<i>/{aa.json,aa.md,worker.json},
summary.md; then writes OUT_DIR/noise.tgz of all of it, and host.txt and summary.md beside it
(the device tool brings back a few files a call, not 38: its first run lost ten workers' JSON).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"({' '.join(cmd)}: {exc})\n"


def gpu_local_cpus() -> list[int]:
    """The CPUs of the GPU's NUMA node (its PCI device's local_cpulist), allowed here."""
    allowed = sorted(os.sched_getaffinity(0))
    bus = _run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"]).strip()
    local: set[int] = set()
    if bus:
        dom, _, rest = bus.splitlines()[0].lower().partition(":")
        path = Path(f"/sys/bus/pci/devices/{dom[-4:]}:{rest}/local_cpulist")
        try:
            for part in path.read_text().strip().split(","):
                a, _, b = part.partition("-")
                local.update(range(int(a), int(b or a) + 1))
        except (OSError, ValueError):
            pass
    return [c for c in allowed if c in local] or allowed


def placement_cpus(name: str, local: list[int]) -> list[int] | None:
    if name.startswith("local4"):
        return local[:4]
    if name == "core2":
        return local[:2]
    return None


def worker(name: str, out: Path) -> int:
    """One process: the A/A bench under placement `name`; its rusage and the GPU's clocks."""
    import gc
    import resource

    cpus = placement_cpus(name, gpu_local_cpus())
    if cpus:
        os.sched_setaffinity(0, cpus)  # before MLX starts its threads: they inherit it
    from core.cli import main as cli

    out.mkdir(parents=True, exist_ok=True)
    argv = ["bench", "--target", os.environ.get("TARGET", "default"), "--prompt-name", os.environ.get("PROMPT", "creative-seed-vault"),
            "--tokens", os.environ.get("TOKENS", "256"), "--seeds", os.environ.get("SEEDS", "3"),
            "--invocations", "1", "--warmup", "1", "--temperature", os.environ.get("TEMPERATURE", "0.0"),
            "--repetition-penalty", "1.0", "--no-quality", "--no-predict", "--no-traced",
            "--profile", "target-only", "--profile", "target-only:top_p=1.0",
            "--json", str(out / "aa.json"), "--markdown", str(out / "aa.md")]
    clocks = ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,pstate,temperature.gpu",
              "--format=csv,noheader"]
    before, gpu0, load0 = resource.getrusage(resource.RUSAGE_SELF), _run(clocks), os.getloadavg()
    if name.endswith("nogc"):
        gc.collect()
        gc.disable()
    t0 = time.perf_counter()
    try:
        rc = cli(argv)
    except SystemExit as exc:
        rc = int(exc.code or 0)
    wall = time.perf_counter() - t0
    gc.enable()
    after = resource.getrusage(resource.RUSAGE_SELF)
    doc = {"placement": name, "cpus": cpus or sorted(os.sched_getaffinity(0)), "rc": rc,
           "wall_s": wall, "loadavg_before": load0, "loadavg_after": os.getloadavg(),
           "gpu_before": gpu0.strip(), "gpu_after": _run(clocks).strip(),
           "involuntary_switches": after.ru_nivcsw - before.ru_nivcsw,
           "voluntary_switches": after.ru_nvcsw - before.ru_nvcsw,
           "user_s": after.ru_utime - before.ru_utime, "system_s": after.ru_stime - before.ru_stime}
    (out / "worker.json").write_text(json.dumps(doc, indent=1) + "\n")
    return rc


def summary(out: Path, placements: list[str]) -> str:
    """Per placement, every timed request pooled over the rounds: median, min-max, the
    coefficient of variation, the A/A ratio per seed (second row over first, same seed) and
    the involuntary context switches a worker took."""
    lines = ["| placement | CPUs | requests | median E2E s | min-max s | CV | A/A per-seed min-max | "
             "A/A median ratio per round | involuntary switches per worker |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in placements:
        times, pairs, meds, switches, cpus = [], [], [], [], "-"
        for d in sorted(out.glob(f"{name}-r*")):
            try:
                rows = json.loads((d / "aa.json").read_text())["results"]
                w = json.loads((d / "worker.json").read_text())
            except (OSError, ValueError, KeyError):
                continue
            a, b = rows[0]["e2e_s"], rows[1]["e2e_s"]
            times += a + b
            pairs += [x / y for x, y in zip(a, b, strict=False) if y]
            meds.append(statistics.median(a) / statistics.median(b))
            switches.append(w["involuntary_switches"])
            cpus = (
                ",".join(map(str, w["cpus"])) if len(w["cpus"]) <= 4 else f"{len(w['cpus'])} CPUs"
            )
        if not times:
            lines.append(f"| {name} | - | 0 | | | | | | |")
            continue
        cv = statistics.pstdev(times) / statistics.mean(times)
        lines.append(f"| {name} | {cpus} | {len(times)} | {statistics.median(times):.3f} | "
                     f"{min(times):.3f}-{max(times):.3f} | {cv:.3f} | "
                     f"{min(pairs):.2f}-{max(pairs):.2f}x | {' '.join(f'{m:.2f}' for m in meds)} | "
                     f"{' '.join(map(str, switches))} |")
    return "\n".join(lines) + "\n"


def main(dest: Path) -> int:
    import shutil
    import tarfile

    out = Path("/tmp/noise-work")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    dest.mkdir(parents=True, exist_ok=True)
    placements = os.environ.get("PLACEMENTS", "free local4 local4-nogc core2").split()
    host = ["nproc: " + _run(["nproc"]), "allowed: " + str(sorted(os.sched_getaffinity(0))) + "\n",
            "gpu-local: " + str(gpu_local_cpus()) + "\n", _run(["lscpu"]),
            _run(["numactl", "--hardware"]), _run(["nvidia-smi", "topo", "-m"]),
            "loadavg: " + str(os.getloadavg()) + "\n"]
    (out / "host.txt").write_text("".join(host))
    print("".join(host[:3]), flush=True)
    for r in range(int(os.environ.get("ROUNDS", "3"))):
        for name in placements:
            t0 = time.perf_counter()
            rc = subprocess.call([sys.executable, __file__, "--worker", name, str(out / f"{name}-r{r}")],
                                 cwd=ROOT, stdout=subprocess.DEVNULL)
            print(f"{name} round {r}: exit {rc} in {time.perf_counter() - t0:.0f} s", flush=True)
            (out / "summary.md").write_text(summary(out, placements))  # kept if the call is cut
    text = summary(out, placements)
    (out / "summary.md").write_text(text)
    with tarfile.open(dest / "noise.tgz", "w:gz") as tar:
        tar.add(out, arcname=".")
    for name in ("host.txt", "summary.md"):
        shutil.copy(out / name, dest / name)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--worker":
        sys.exit(worker(sys.argv[2], Path(sys.argv[3])))
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/noise")))
