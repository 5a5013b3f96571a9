#!/usr/bin/env bash
# Issue 17 on nvidia-h200-x2: the same bench with the target sharded over the two GPUs (TP = 2,
# NCCL, mlx-lm's shard()) and on one GPU (TP = 1), back to back in one call, TP = 2 first.
# On the device, after pack.sh's two set-up calls (the second can run this directly):
#   export PYTHONPATH=/tmp/site:$PWD; bash docs/benchmarks/h200/tp.sh $OUT
# Env: TARGET (default the 72B shape cut to 40 of its 80 layers: the same layers and
# collectives, half the build time), DRAFT, TOKENS, SEEDS, LIMIT (seconds per bench; a bench
# cut there leaves its log), BACKEND (nccl; ring on a CPU).
set -u
out="${1:?usage: tp.sh OUTDIR}"
mkdir -p "$out/tp"
# A kernel cache carried in .device/kcache (kcache.sh) spares this call the compiles.
bash docs/benchmarks/h200/kcache.sh restore
export PYTHONUNBUFFERED=1
py="${PYTHON:-python3}"
args=(--target "${TARGET:-shape:qwen2.5-72b,layers=40}" --draft "${DRAFT:-shape:qwen2.5-0.5b}"
      --prompt-name creative-800 --tokens "${TOKENS:-128}" --seeds "${SEEDS:-2}" --invocations 1
      --warmup 1 --no-quality --profile target-only --profile fixed-8-tv1:bonus=true
      --profile fixed-8-tv0.5:bonus=true)
launch="import sys; from mlx._distributed_utils.launch import main; sys.exit(main())"
cli=docs/benchmarks/h200/specdec.py
echo "== TP=2 $(date +%T)"
timeout "${LIMIT:-150}" "$py" -c "$launch" -n 2 --backend "${BACKEND:-nccl}" --python "$py" -- \
    "$cli" bench "${args[@]}" --json "$out/tp/tp2.json" --markdown "$out/tp/tp2.md" \
    > "$out/tp/tp2.log" 2>&1
echo "rc $? $(date +%T)"; tail -c 3000 "$out/tp/tp2.log"
echo "== TP=1 $(date +%T)"
CUDA_VISIBLE_DEVICES=0 timeout "${LIMIT:-150}" "$py" "$cli" bench "${args[@]}" \
    --json "$out/tp/tp1.json" --markdown "$out/tp/tp1.md" > "$out/tp/tp1.log" 2>&1
echo "rc $? $(date +%T)"; tail -c 3000 "$out/tp/tp1.log"
tar -czf "$out/tp.tgz" -C "$out" tp && rm -rf "$out/tp"
