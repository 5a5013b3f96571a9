#!/usr/bin/env bash
# Ran on an H100 on 2026-12-06 (PARTS="target pair" in one call, "lookup" in the next):
# docs/benchmarks/steps.md renders its JSON.
#
# Issue 56: does the compiled forward (`--step compiled`, core/primitives/compiled.py: the
# 1-row step and every verification bucket as traced graphs over a fixed-capacity KV buffer)
# make a step cost what the GPU does? step_ab.py (beside this) measures, arms interleaved per
# seed with one warm-up request each:
#   target  target-only on the default model and the 7B shape: eager vs compiled vs mlx-lm
#           (goals: compiled >= 1.4x mlx-lm on the default, >= 1.15x on the 7B shape)
#   pair    the real pair's shapes (qwen2.5 1.5B/0.5B): draft and target ms a step per step
#           kind (goal: draft <= 0.55 of target) and fixed-8 at TV 0.5 over target-only
#           (goal: >= 1.0x)
#   lookup  the default model on code-refactor-pasted greedy: a lookup round in plain steps
#           (goal: <= 1.25) and the default settings over target-only (goal: >= 2.3x)
# What the run must decide: whether `auto` (compiled where the calibration measured it no
# slower) becomes the default `step`, and, if the compiled step loses anywhere, which part of
# a step's cost no compile removes (run it again with MLX's profiler on that part).
#
# On the device, after pack.sh's set-up calls (tools/device/README.md), carrying .device/kcache:
#   export SPECDEC_TUI_CACHE=/root/sdcache
#   bash docs/benchmarks/h200/step-ab.sh $OUT        (it restores the kernel cache)
# Environment: PARTS ("target pair lookup"), SEEDS (3), TOKENS (256), and step_ab.py's own.
# One part per call fits the 10-minute limit where the 7B shape loads (LIMIT_S, default 540,
# cuts the part). Writes $OUT/step-ab-PART.json, $OUT/step-ab.log and the kernel cache's parts.
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 SEEDS=${SEEDS:-3} TOKENS=${TOKENS:-256}
LIMIT_S=${LIMIT_S:-540}
PYTHONPATH=/tmp/site:$PWD bash tools/device/kcache.sh restore  # nothing compiles twice
python3 -c "import mlx.core as mx; print('mlx', mx.__version__, mx.default_device(), mx.device_info().get('device_name'))" | tee "$OUT/step-ab.log" || exit 3
for P in ${PARTS:-target pair lookup}; do
  echo "== $P ($(date -u +%T))" | tee -a "$OUT/step-ab.log"
  PARTS=$P PYTHONPATH=/tmp/site:$PWD timeout "$LIMIT_S" \
    python3 docs/benchmarks/h200/step_ab.py "$OUT/step-ab-$P.json" 2>&1 | tee -a "$OUT/step-ab.log"
done
PYTHONPATH=/tmp/site:$PWD bash tools/device/kcache.sh save "$OUT"
ls -la "$OUT"
