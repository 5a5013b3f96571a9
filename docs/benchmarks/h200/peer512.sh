#!/usr/bin/env bash
# Issue 28's mlx-lm peer at 512 tokens, in one call: ours against mlx-lm's own generate_step
# and speculative_generate_step on the same models (`shape:qwen2.5-7b` / `shape:qwen2.5-0.5b`,
# random weights of the real shapes, greedy, k = 4), each mlx-lm request right after ours
# with the same seed (bench --peer mlx-lm: paired, ABAB).
#
# Why its own script: edition2.sh's `peer` part runs 128 and 512 tokens in one call, 3 seeds x
# 2 invocations each, and at 512 tokens one mlx-lm speculative request takes ~49 s on the H200
# (every round misses MLX CUDA's attention-plan cache and rebuilds it: h200-edition3.md,
# section 3): its 7 requests alone were ~340 s, so the call ran out before the 512-token bench
# finished. Here: 512 tokens only, SEEDS (default 2) x 1 invocation, 1 warm-up; about
# 3 x (3 + 25 + 3 + 49) s of requests plus ours traced once a seed (~55 s): ~5 min, with the
# 7B shape's build and, on a machine whose kernel cache lacks the 7B shapes, their compiles
# (a minute or two; kept out of every timed number, and saved for the next call below).
# SDPA_CACHE=4096 sets MLX_CUDA_SDPA_CACHE_SIZE so mlx-lm's plans stop being evicted (the
# warm-cache reading; the default reads it as a chat pays it); TRACED=0 drops our traced
# requests (~1 min less; the per-round column then stays empty).
#
# On a machine set up by pack.sh (its first two set-up calls; the default model is not used),
# carrying .device/kcache:
#   export PYTHONPATH=/tmp/site:$PWD; bash docs/benchmarks/h200/peer512.sh $OUT
# Writes $OUT/peer-512[-sdpaN].json, .md and .log, and the kernel cache's parts (kcache.sh
# save: take them here with `bash tools/device/kcache.sh take FILES_AT`).
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
bash tools/device/kcache.sh restore  # a carried kernel cache: nothing compiles twice
T=${TOKENS:-512}
name="peer-$T${SDPA_CACHE:+-sdpa$SDPA_CACHE}"
if [ -n "${SDPA_CACHE:-}" ]; then export MLX_CUDA_SDPA_CACHE_SIZE=$SDPA_CACHE; fi
traced=(); if [ "${TRACED:-1}" = "0" ]; then traced=(--no-traced); fi
python3 -c "import mlx.core as mx; print(mx.default_device(), mx.device_info().get('device_name'))" || exit 3
timeout "${TIMEOUT_S:-440}" python3 -m core.cli bench \
  --target shape:qwen2.5-7b --draft shape:qwen2.5-0.5b --prompt-name creative-800 \
  --tokens "$T" --seeds "${SEEDS:-2}" --invocations 1 --warmup 1 --no-predict "${traced[@]}" \
  --profile target-only:temperature=0.0 --peer mlx-lm --peer-k 4 \
  --json "$OUT/$name.json" --markdown "$OUT/$name.md" 2>&1 | tee "$OUT/$name.log" | tail -30
bash tools/device/kcache.sh save "$OUT"
ls -la "$OUT"
