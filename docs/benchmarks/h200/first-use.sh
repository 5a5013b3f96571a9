#!/usr/bin/env bash
# Issue 31's goal on a fresh H200: `specdec-tui chat` on the default model (SmolLM2-135M Q4_1,
# drafted by self:bits=4) prints its first token within 60 s of starting, on a machine WITHOUT
# a kernel cache (the first bench of 2026-12-01 compiled for more than 300 s before it).
#
# After the three set-up calls of `bash docs/benchmarks/h200/pack.sh --default-model` (the
# third one can run this; do NOT carry .device/kcache: this measures a machine without one):
#   source .device/c/model.sh && bash docs/benchmarks/h200/first-use.sh $OUT
# Later calls on the same warm machine:
#   export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache; bash docs/benchmarks/h200/first-use.sh $OUT
# Each chat runs under an empty $MLX_PTX_CACHE_DIR of its own unless it is a "warm" part, so
# no kernel compiled before it (by model.sh's fetch, or an earlier part) is reused.
# Parts (PARTS, default "cold warm"; about 1-3 minutes each):
#   cold    chat's defaults (fixed k = 4, greedy, 64 tokens), an empty kernel cache
#   warm    the same chat again on the kernel cache `cold` left (what a second start costs)
#   cost    `chat --profile hybrid-cost-aware` (the app's first-run default), an empty kernel
#           cache and an empty curve cache: its first turn calibrates, which warms every size
#   cost2   the same again, kernel and curve caches kept: the saved curve is reused
# Writes into $OUT: first-use-PART.log (stdout and stderr, each line stamped with seconds since
# the command started), first-use.json (per part: seconds to the first token on stdout, to
# the end, the exit status, the goal and whether it was met) and the kernel cache's parts
# (kcache.sh save: carry them into later calls that should not compile again).
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PROMPT=${PROMPT:-"What is the capital of France?"}
GOAL_S=${GOAL_S:-60}
LIMIT_S=${LIMIT_S:-330}  # a part still running then is cut (its log and JSON say so)
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
for part in ${PARTS:-cold warm}; do
  case $part in
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
MLX_PTX_CACHE_DIR="$W/ptx-cold" bash docs/benchmarks/h200/kcache.sh save "$OUT"
