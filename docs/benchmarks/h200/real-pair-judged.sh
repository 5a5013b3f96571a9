#!/usr/bin/env bash
# Issue 55 on the H200: the real Qwen2.5-Coder pair's TV sweep again (1.5B Q4_K_M target, 0.5B
# draft: the GGUFs docs/benchmarks/real-pair/fetch.py pins), now that the sweep keeps every
# seed's text with each token's origin (the reading page, `sweep --read`) and every prompt it
# runs here carries a task check, the copied/repetition measures and the default bounds. The
# question is the seed's: what a TV budget gives up, read against target-only's text of the
# same seed, and whether the task column separates the cells.
#
# Protocol: T = 0.7 only (at T = 0 the budgets collapse to one greedy cell), 256 new tokens,
# 3 seeds, 1 invocation (the paired per-request ratios give the spread), 1 warm-up per cell
# and prompt, rows target-only, draft-only and fixed-8 at TV 0/0.25/0.5/0.75/1 (fixed-8: the
# TV axis read at one proposal length, as real-pair-sweep.sh says why), repetition penalty
# off, bonus token on, the recommendation under the sweep's default bounds (no bound flags;
# BOUNDS="..." adds some). Then, while the lease lasts, the cost-aware policy (k up to 32, the
# draft model) at TV 0.5 (COST_AWARE=0 leaves it out), then the fixed-8 grid on the prompts in
# EXTRA, if any (given to `start`, or to a `wait` call before that last sweep starts).
#
# Device plan (one 30-minute lease, ~25 minutes of device time):
#   set-up, pack.sh without --default-model: 2 calls (carry .device/a, then .device/b);
#   staging the pair (1.6 GB): the device set-up's stage-files tool (tools/device/README.md)' format (one tar, split; each
#     call appends its part to /root/stage/blob, the last unpacks it and checks the sha256),
#     in parts of 51.5 MiB (30 calls, ~10 s each) rather than 48 (32), as the 10.5 MiB tree
#     leaves room for;
#   the sweeps: one process chain started in the background (setsid) by the call that carries
#     the last part, so the pair loads once per sweep and no call's cut loses a block; every
#     call after it waits up to WAIT s (default 400) and brings back everything so far.
# Estimate at ~60 s a prompt block (7 cells x (1 warm-up + 3 seeds), ~2 s a 256-token
# request, as run 4's sweep measured) plus the first load's GGUF conversion and compiles
# (~2 min): the main sweep ~8.5 min, the cost-aware cells ~2 min.
#
# Run on 2026-12-06 (main at d54ac77, an nvidia-h200 lease): the set-up calls took 0.3 and 7 s,
# each staging call ~4 s of device time (not 10), the pair's first load with the GGUF conversion
# and the compiles ~100 s (the carried kernel cache restored first), a prompt block ~38 s: the
# main sweep's six prompts finished in 330 s of one call. The cost-aware sweep did not run: eight
# machine starts failed (810 s of device time), eleven calls were refused (15 s each) and one
# machine was taken back mid-staging (~200 s lost), which left 435 s for the last call. Plan for such losses: the data
# (docs/benchmarks/data/h200-real-pair-judged/) is what one clean lease of ~11 minutes gives.
# The calls (after pack.sh's two set-up calls and the staging calls but the last):
#   carry [".device/stage/029", ".device/kcache"]:
#     cat .device/stage/029/part >> /root/stage/blob && bash .device/stage/029/unpack.sh &&
#     export SPECDEC_TUI_COMMIT=<HEAD>; bash docs/benchmarks/h200/real-pair-judged.sh start $OUT
#   then, until it says "all done":
#     bash docs/benchmarks/h200/real-pair-judged.sh wait $OUT
#   and, to end it early (a lease running out): STOP=1 bash ... wait $OUT (SIGINT to the
#     running sweep, which keeps its finished blocks; no later sweep starts).
# Each `start`/`wait` call brings back $OUT/real-pair-judged.tgz (every sweep's JSON, Markdown,
# CSV, SVG, reading page and log so far) and, once all is done or stopped, the kernel cache's
# parts (kcache.sh save). Here, afterwards:
#   tar -xzf FILES_AT/real-pair-judged.tgz -C docs/benchmarks/data/h200-real-pair-judged/
#   python3 docs/benchmarks/rawdata.py compress   (the data folder keeps its JSON xz'd)
#   PYTHONPATH=$PWD python3 docs/benchmarks/real-pair/make_page.py
# `fg` instead of `start` runs the same chain in the foreground, cut at LIMIT s (default 420).
set -uo pipefail
cmd=${1:?usage: real-pair-judged.sh start|wait|fg|_chain OUT}
OUT=${2:-/tmp/out}; mkdir -p "$OUT"
STAGE=${STAGE:-/root/stage}
TARGET=$STAGE/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
DRAFT=$STAGE/qwen2.5-coder-0.5b-instruct.gguf
W=${W:-/root/real-pair-judged}  # outside the tree: kept between the calls of one machine
PROMPTS=${PROMPTS:-code-rename creative-seed-vault math-boxes rewrite-paragraph code-refactor-pasted code-edit-pasted}
EXTRA=${EXTRA:-}
COST_AWARE=${COST_AWARE:-1}
WAIT=${WAIT:-400}
LIMIT=${LIMIT:-420}
export PYTHONUNBUFFERED=1 SPECDEC_TUI_CACHE=${SPECDEC_TUI_CACHE:-/root/sdcache}
export PYTHONPATH=${PYTHONPATH:-/tmp/site:$PWD}
mkdir -p "$W" "$SPECDEC_TUI_CACHE"

sweep() {  # name, prompts (one word list), grid args...: one sweep, its pid in $W/sweep.pid
  local name=$1 prompts=$2; shift 2
  [ -e "$W/STOP" ] && { echo "$name: not started (stopped)"; return 0; }
  echo "$name: start $(date +%T)"
  # Foreground with exec, so the sweep keeps SIGINT's default (a background job's is ignored)
  # and its pid is known: `wait` with STOP=1 interrupts it there.
  # shellcheck disable=SC2046,SC2086
  bash -c 'echo $$ > "$0"; exec "$@"' "$W/sweep.pid" python3 -m core.cli sweep \
    --target "$TARGET" --draft "$DRAFT" --tokens "${TOKENS:-256}" --seeds "${SEEDS:-3}" \
    --invocations 1 --warmup 1 --temperatures 0.7 --repetition-penalty 1.0 --no-plot \
    $(printf -- '--prompt-name %s ' $prompts) ${BOUNDS:-} ${SWEEP_ARGS:-} "$@" \
    --json "$W/$name.json" --markdown "$W/$name.md" --csv "$W/$name.csv" --force \
    > "$W/$name.log" 2>&1
  echo "$name: exit $? $(date +%T)"; tail -25 "$W/$name.log"
}

chain() {
  sweep real-pair-judged "$PROMPTS" --tv 0,0.25,0.5,0.75,1 --policies fixed-8
  [ "$COST_AWARE" = 1 ] && sweep real-pair-judged-cost-aware "$PROMPTS" --tv 0.5 \
    --policies cost-aware-32 --no-draft-only
  [ -s "$W/extra.txt" ] && EXTRA=$(cat "$W/extra.txt")  # named by a later `wait` call
  [ -n "$EXTRA" ] && sweep real-pair-judged-more "$EXTRA" --tv 0,0.25,0.5,0.75,1 --policies fixed-8
  touch "$W/ALL-DONE"
}

pack() {
  tar -czf "$OUT/real-pair-judged.tgz" -C "$W" --exclude sweep.pid .
  ls -la "$OUT"
}

progress() {  # the running sweep's last progress line
  local log; log=$(ls -t "$W"/real-pair-judged*.log 2>/dev/null | head -1)
  [ -n "$log" ] && echo "$(date +%T) $(basename "$log"): $(grep -a '^\[' "$log" | tail -1)"
}

case "$cmd" in
  start)
    for f in "$TARGET" "$DRAFT"; do
      [ -f "$f" ] || { echo "$f is not staged: stage the pair first" >&2; exit 2; }
    done
    python3 -c "import mlx.core as mx, gguf; print('mlx', mx.__version__, mx.default_device())" || exit 2
    bash tools/device/kcache.sh restore
    rm -rf "$W" && mkdir -p "$W"
    nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader > "$W/gpu.txt"
    git rev-parse HEAD > "$W/tree-head.txt" 2>/dev/null
    echo "SPECDEC_TUI_COMMIT=${SPECDEC_TUI_COMMIT:-}" >> "$W/tree-head.txt"
    # A session of its own (the device keeps such a process when the call returns), with
    # SIGINT at its default (a shell's background job would ignore it, and so its sweeps).
    python3 -c 'import os, signal, sys
if os.fork() == 0:
    os.setsid(); signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execvp("bash", ["bash", *sys.argv[1:]])' "$0" _chain "$OUT" > "$W/chain.log" 2>&1 < /dev/null
    echo "started the chain ($(date +%T)): prompts $PROMPTS; cost-aware $COST_AWARE; extra ${EXTRA:-none}"
    exec bash "$0" wait "$OUT"
    ;;
  _chain) chain ;;
  fg)
    bash tools/device/kcache.sh restore
    export -f sweep chain; export W PROMPTS EXTRA COST_AWARE TARGET DRAFT
    timeout -s INT -k 30 "$LIMIT" bash -c chain
    pack; bash tools/device/kcache.sh save "$OUT"
    ;;
  wait)
    t0=$(date +%s); last=0
    # EXTRA="p1 p2" on a wait call: prompts for the chain's last sweep, decided once the first
    # sweeps' pace shows whether the lease holds them (only before that sweep has started).
    [ -n "${EXTRA:-}" ] && echo "$EXTRA" > "$W/extra.txt" && echo "extra prompts: $EXTRA"
    if [ "${STOP:-0}" = 1 ]; then
      touch "$W/STOP"
      [ -f "$W/sweep.pid" ] && kill -INT "$(cat "$W/sweep.pid")" 2>/dev/null
      WAIT=${STOP_WAIT:-60}
    fi
    while [ ! -e "$W/ALL-DONE" ] && (( $(date +%s) - t0 < WAIT )); do
      if (( $(date +%s) - last >= 30 )); then progress; last=$(date +%s); fi
      sleep 3
    done
    cat "$W/chain.log"
    pack
    if [ -e "$W/ALL-DONE" ]; then
      bash tools/device/kcache.sh save "$OUT"
      echo "all done ($(date +%T))"
    else
      echo "still running ($(date +%T)): call wait again"
    fi
    ;;
  *) echo "usage: real-pair-judged.sh start|wait|fg OUT" >&2; exit 2 ;;
esac
