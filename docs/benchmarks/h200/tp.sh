#!/usr/bin/env bash
# Issues 17 and 33 on nvidia-h200-x2: the same bench with the target sharded over the two GPUs
# (TP = 2, NCCL, mlx-lm's shard()), then one rank's shard alone on one GPU (shardstep.py: the
# TP = 2 step's compute, no collectives), then the whole target on one GPU (TP = 1), in one
# call. Every bench times untraced requests and a traced one per seed (the tracing overhead),
# and the TP = 2 traced request prices its collectives (comm) instead of waiting for them.
# tp_report.py renders the two checks from the raw JSON into report.md.
# On the device, after pack.sh's two set-up calls (the second can run this directly):
#   export PYTHONPATH=/tmp/site:$PWD; bash docs/benchmarks/h200/tp.sh $OUT
# About 4-5 minutes with a warm kernel cache (kcache.sh restore first; TP = 2 took 145 s, TP = 1
# 45 s on 2026-12-01); LIMIT (150 s each) keeps the worst case at 7.5 of the call's 8 minutes.
# Env: TARGET (default the 72B shape cut to 40 of its 80 layers: the same layers and
# collectives, half the build time), DRAFT, TOKENS, SEEDS, LIMIT (seconds per bench; a bench
# cut there leaves its log), BACKEND (nccl; ring on a CPU), SHARD (0 skips the shard step).
set -u
out="${1:?usage: tp.sh OUTDIR}"
mkdir -p "$out/tp"
# A kernel cache carried in .device/kcache (kcache.sh) spares this call the compiles.
bash tools/device/kcache.sh restore
export PYTHONUNBUFFERED=1
py="${PYTHON:-python3}"
common=(--target "${TARGET:-shape:qwen2.5-72b,layers=40}" --draft "${DRAFT:-shape:qwen2.5-0.5b}"
        --prompt-name creative-800 --tokens "${TOKENS:-128}" --seeds "${SEEDS:-2}" --invocations 1
        --warmup 1 --no-quality)
args=("${common[@]}" --profile target-only --profile fixed-8-tv1:bonus=true
      --profile fixed-8-tv0.5:bonus=true)
launch="import sys; from mlx._distributed_utils.launch import main; sys.exit(main())"
here=docs/benchmarks/h200
echo "== TP=2 $(date +%T)"
timeout "${LIMIT:-150}" "$py" -c "$launch" -n 2 --backend "${BACKEND:-nccl}" --python "$py" -- \
    "$here/specdec.py" bench "${args[@]}" --json "$out/tp/tp2.json" --markdown "$out/tp/tp2.md" \
    > "$out/tp/tp2.log" 2>&1
echo "rc $? $(date +%T)"; tail -c 2000 "$out/tp/tp2.log"
if [ "${SHARD:-1}" != 0 ]; then
  echo "== one shard of TP=2, alone $(date +%T)"
  CUDA_VISIBLE_DEVICES=0 timeout "${LIMIT:-150}" "$py" "$here/shardstep.py" bench "${common[@]}" \
      --profile target-only --json "$out/tp/shard.json" --markdown "$out/tp/shard.md" \
      > "$out/tp/shard.log" 2>&1
  echo "rc $? $(date +%T)"; tail -c 1200 "$out/tp/shard.log"
fi
echo "== TP=1 $(date +%T)"
CUDA_VISIBLE_DEVICES=0 timeout "${LIMIT:-150}" "$py" "$here/specdec.py" bench "${args[@]}" \
    --json "$out/tp/tp1.json" --markdown "$out/tp/tp1.md" > "$out/tp/tp1.log" 2>&1
echo "rc $? $(date +%T)"; tail -c 2000 "$out/tp/tp1.log"
"$py" "$here/tp_report.py" "$out/tp" > "$out/tp/report.md" 2>&1; cat "$out/tp/report.md"
tar -czf "$out/tp.tgz" -C "$out" tp && rm -rf "$out/tp"
