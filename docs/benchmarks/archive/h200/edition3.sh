#!/usr/bin/env bash
# The H200 report, third edition (issue 21): the 72B regime at 256 tokens with the corrected
# prediction (the calibration now times the draft chain sampled as the rows draft, and the
# acceptance), and what a fresh machine says while it compiles.
#
# After pack.sh's set-up calls, in one call (about 7 minutes), carrying .device/kcache if a
# previous call saved one:
#   export PYTHONPATH=/tmp/site:$PWD; bash docs/benchmarks/archive/h200/edition3.sh $OUT
# Parts (PARTS, default "chat key"):
#   chat   the first chat on this machine (0.5B shape pair, random weights), every output line
#          stamped with seconds since the command started: the compile notice and its timing
#   key    the 2026-12-01 run's settings again (data/h200-2026-12-01/key72-256.json.xz): the 72B
#          shape target, the 0.5B shape draft, creative-800, 256 tokens, 2 seeds: target-only,
#          fixed-8 at TV 1, k = 31 at TV 1, fixed-8 at TV 0.5, cost-aware <= 15 at TV 0.5,
#          cost-aware <= 31 at TV 1 (bonus on)
# Writes into $OUT: chat.log, key72-256.{json,md,log}, and the kernel cache parts.
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T=${TOKENS:-256}
stamp() { python3 -u -c "
import sys, time
t0 = time.time()
for line in sys.stdin:
    sys.stdout.write(f'[{time.time() - t0:7.2f} s] {line}')"; }

bash tools/device/kcache.sh restore
for part in ${PARTS:-chat key}; do
  case $part in
    chat)
      python3 -m core.cli chat --target shape:qwen2.5-0.5b --draft shape:qwen2.5-0.5b \
        --max-tokens 16 "Say hello." 2>&1 | stamp | tee "$OUT/chat.log" ;;
    key)
      python3 -m core.cli bench --target shape:qwen2.5-72b --draft shape:qwen2.5-0.5b \
        --prompt-name creative-800 --tokens "$T" --seeds 2 --invocations 1 --warmup 1 \
        --no-quality --profile target-only --profile fixed-8-tv1:bonus=true \
        --profile fixed-8-tv1:k=31,k_max=31,bonus=true --profile fixed-8-tv0.5:bonus=true \
        --profile cost-aware:rule=mentored,tv_budget=0.5,k_max=15 \
        --profile cost-aware:rule=mentored,tv_budget=1.0,k_max=31 \
        --json "$OUT/key72-$T.json" --markdown "$OUT/key72-$T.md" 2>&1 | tee "$OUT/key72-$T.log" ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
done
bash tools/device/kcache.sh save "$OUT"
