#!/usr/bin/env bash
# Issue 31's goal on a fresh H200: `specdec-tui chat` on the default model (SmolLM2-135M Q4_1,
# drafted by self:bits=4) prints its first token within 60 s of starting, on a machine WITHOUT
# a kernel cache (2026-12-01: still compiling at 90 s, docs/benchmarks/data/h200-2026-12-01-s5/
# first-use/; the probe data/h200-2026-12-01-first-probe pinned it on qmm kernels, ~30 s each,
# compiled from 8 rows up). chat now starts narrow on such a machine (core/runtime/warm_start.py:
# every forward below 8 rows, which run precompiled kernels).
#
# After the three set-up calls of `bash tools/device/pack.sh --default-model` (the
# third one can run this; do NOT carry .device/kcache: this measures a machine without one):
#   source .device/c/model.sh && bash docs/benchmarks/h200/first-use.sh $OUT
# Later calls on the same warm machine:
#   export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache; bash docs/benchmarks/h200/first-use.sh $OUT
# Each chat runs under an empty $MLX_PTX_CACHE_DIR of its own unless it is a "warm" part, so
# no kernel compiled before it (by model.sh's fetch, or an earlier part) is reused.
# Parts (PARTS, default "imports cold warm"; LIMIT_S, default 150, cuts a part; about 4-6
# minutes in all):
#   imports the CLI's imports (python -X importtime), once without bytecode (what a fresh tree
#           or unpacked wheels cost; pip compiles it at install) and once with it
#   cold    chat's defaults (first_run_settings: hybrid drafting, the cost-aware k, T = 0.7,
#           256 tokens), an empty kernel cache and an empty curve cache: it starts narrow,
#           calibrates 7 rows and prints the first token
#   warm    the same chat again on what `cold` left (its kernels and its kept 7-row curve)
#   cost    `chat --profile hybrid-cost-aware`, empty kernel and curve caches (as cold)
#   cost2   the same again, kernel and curve caches kept: the saved curve is reused
# Writes into $OUT: first-use-PART.log (stdout and stderr, each line stamped with seconds since
# the command started: "loading ..." comes after the imports, the narrow-start line after the
# load), first-use.json (per part: seconds to the first token on stdout, to the end, the exit
# status, the goal and whether it was met), importtime-{nopyc,pyc}.txt and the kernel cache's
# parts (kcache.sh save: carry them into later calls that should not compile again).
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PROMPT=${PROMPT:-"What is the capital of France?"}
GOAL_S=${GOAL_S:-60}
LIMIT_S=${LIMIT_S:-150}  # a part still running then is cut (its log and JSON say so)
W=/tmp/first-use; rm -rf "$W"; mkdir -p "$W"
python3 -c "import mlx.core as mx; print('mlx', mx.__version__, mx.default_device(), mx.device_info().get('device_name'))" || exit 3

# first_token PART CMD...: runs CMD, stamps each line of its stdout and stderr with the seconds
# since it started, and records when its first stdout byte came (chat prints nothing on stdout
# before the answer's first token: notices and the summary go to stderr).
first_token() {
  local part=$1; shift
  python3 - "$part" "$OUT" "$GOAL_S" "$LIMIT_S" "$@" <<'PY'
import json, os, selectors, subprocess, sys, time
part, out, goal, limit, cmd = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5:]
t0 = time.monotonic()
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
sel = selectors.DefaultSelector()
sel.register(proc.stdout, selectors.EVENT_READ, "out")
sel.register(proc.stderr, selectors.EVENT_READ, "err")
first = None
pending = {"out": b"", "err": b""}
with open(os.path.join(out, f"first-use-{part}.log"), "w") as log:
    log.write(f"$ {' '.join(cmd)}\n")
    def emit(stream, data, final=False):
        pending[stream] += data
        *lines, pending[stream] = pending[stream].split(b"\n")
        if final and pending[stream]:
            lines.append(pending[stream]); pending[stream] = b""
        for line in lines:
            text = f"[{time.monotonic() - t0:7.2f} s] {stream}: {line.decode(errors='replace')}\n"
            log.write(text); sys.stdout.write(text)
        log.flush()
    open_streams, cut = 2, False
    while open_streams:
        if not cut and time.monotonic() - t0 > limit:  # leave the call time to bring files back
            proc.kill(); cut = True
            log.write(f"cut after {limit:.0f} s (LIMIT_S)\n")
        for key, _ in sel.select(timeout=1.0):
            data = os.read(key.fileobj.fileno(), 65536)
            if not data:
                sel.unregister(key.fileobj); open_streams -= 1
                emit(key.data, b"", final=True)
                continue
            if key.data == "out" and first is None and data.strip():
                first = time.monotonic() - t0
            emit(key.data, data)
    rc = proc.wait()
    total = time.monotonic() - t0
    log.write(f"first token on stdout: {first if first is None else round(first, 2)} s; "
              f"exit {rc} after {total:.2f} s\n")
path = os.path.join(out, "first-use.json")
doc = json.load(open(path)) if os.path.exists(path) else {"goal_s": goal, "parts": {}}
doc["parts"][part] = {"command": cmd, "first_token_s": first, "total_s": total, "rc": rc,
                      "cut": cut, "met": first is not None and first <= goal and rc == 0}
json.dump(doc, open(path, "w"), indent=1)
print(f"{part}: first token after {first} s (goal {goal:.0f} s), exit {rc} after {total:.1f} s")
PY
}

chat=(python3 -m core.cli chat)
curves="${SPECDEC_TUI_CACHE:-$HOME/.cache/specdec-tui}/curves"  # core/dispatch/curve_cache.py
imports='import time; t = time.perf_counter(); import core.cli; core.cli.build_parser(); import core.chat.cli, core.models.loader, core.decode.engine, core.runtime.warm_start; print(f"imports {time.perf_counter() - t:.2f} s")'
for part in ${PARTS:-imports cold warm}; do
  case $part in
    imports)
      # without bytecode: a cache folder of its own, nothing written (-B)
      env PYTHONPYCACHEPREFIX="$W/nopyc" python3 -B -X importtime -c "$imports" 2> "$OUT/importtime-nopyc.txt"
      python3 -m compileall -q -j 0 /tmp/site core > /dev/null 2>&1  # what pip does at install
      python3 -X importtime -c "$imports" 2> "$OUT/importtime-pyc.txt"
      sort -t'|' -k2 -n "$OUT/importtime-pyc.txt" | tail -12
      continue ;;
    cold|warm) kernels="$W/ptx-cold" ;;
    cost|cost2) kernels="$W/ptx-cost" ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
  # cold and cost start with nothing compiled and no saved curve; warm and cost2 reuse theirs
  if [[ $part == cold || $part == cost ]]; then rm -rf "$kernels" "$curves"; fi
  mkdir -p "$kernels"
  export MLX_PTX_CACHE_DIR="$kernels"
  case $part in
    cold|warm) first_token "$part" "${chat[@]}" "$PROMPT" ;;
    cost|cost2) first_token "$part" "${chat[@]}" --profile hybrid-cost-aware "$PROMPT" ;;
  esac
done
# The cold part's kernels, for calls that should not compile again (kcache.sh take, here).
MLX_PTX_CACHE_DIR="$W/ptx-cold" bash tools/device/kcache.sh save "$OUT"
