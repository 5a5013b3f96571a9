#!/usr/bin/env bash
# Issue 28's round overhead against mlx-lm on the GPU it was measured on: peer_ops.py (the
# CPU's counts in ../round-overhead.md) on the 7B/0.5B shapes (`--pairs h200`: random weights
# of the real shapes, greedy, k = 4, the same prompt and tokens as mlx-lm's
# speculative_generate_step), and the 0.5B drafting itself (every draft accepted). Besides the
# counts, on a GPU it keeps each loop's wall time a round (unprofiled, requests interleaved
# ours/mlx-lm, REPEATS of each), the number the CPU cannot give.
#
# On a machine set up by pack.sh (its first two set-up calls; the default model is not used),
# carrying .device/kcache:
#   export PYTHONPATH=/tmp/site:$PWD; bash docs/benchmarks/h200/peer-ops.sh $OUT
# About 4-5 min: the shapes' build (~1 min), then per pair 2 warm-ups, one counted run per
# loop (its MLX calls wrapped: slower, never timed) and REPEATS (default 2) x (timed + profiled)
# per loop, TOKENS (default 128) each. Writes $OUT/peer-ops-h200.json and .log, and the kernel
# cache's parts (kcache.sh save).
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
bash tools/device/kcache.sh restore  # a carried kernel cache: nothing compiles twice
python3 -c "import mlx.core as mx; print(mx.default_device(), mx.device_info().get('device_name'))" || exit 3
timeout "${TIMEOUT_S:-440}" python3 docs/benchmarks/peer_ops.py count "$OUT/peer-ops-h200.json" \
  --pairs h200 --tokens "${TOKENS:-128}" --repeats "${REPEATS:-2}" 2>&1 | tee "$OUT/peer-ops-h200.log" | tail -20
bash tools/device/kcache.sh save "$OUT"
ls -la "$OUT"
