#!/usr/bin/env bash
# The H200 measurements of issues 7 and 8, in parts that each fit one device call (10 min)
# and each write their own files, so a call cut short still brings back what finished.
# Run on the GPU machine after the two set-up calls of tools/device/pack.sh, from the repo root:
#   export PYTHONPATH=/tmp/site:$PWD; PARTS="seed ours" bash docs/benchmarks/archive/h200/run-all.sh "$OUT"
# Parts (default: all, in this order):
#   steps  decode-step cost of both shapes, every schedule, fused included (issue 8)   ~1 min
#   seed   the seed's table: target-only, draft-only, fixed-4/6/8 at TV 1, fixed-8 at
#          TV 0.75/0.5, no bonus (the seed's engine)                                    ~3 min
#   ours   bonus on, the k x dispatch 2 x 2, dispatch=fastest, fused draft, cost-aware  ~4 min
#   peer   greedy: ours against mlx-lm's generate_step and speculative_generate_step   ~4 min
#   final  TV = 1 at k = 8/15/31, fused draft, cost-aware k <= 31 at TV 1 and 0.5       ~4 min
# Every bench part measures target-only again, so each file has its own baseline.
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
# A kernel cache carried in .device/kcache (kcache.sh) spares this call the compiles.
bash tools/device/kcache.sh restore
export PYTHONUNBUFFERED=1
M=${M:-"--target shape:qwen2.5-7b --draft shape:qwen2.5-0.5b"}
T=${TOKENS:-256}
SM=${STEP_MODELS:-"--model shape:qwen2.5-0.5b --model shape:qwen2.5-7b"}
PARTS=${PARTS:-"steps seed ours peer final"}
python3 -c "import mlx.core as mx; print(mx.default_device(), mx.device_info().get('device_name'))" || exit 3

bench() {  # bench NAME [bench flags...]
  local name=$1; shift
  python3 -m core.cli bench $M --prompt-name creative-800 --tokens "$T" --seeds 3 \
    --invocations 1 --warmup 1 "$@" \
    --json "$OUT/$name.json" --markdown "$OUT/$name.md" 2>&1 | tee "$OUT/$name.log"
}

for part in $PARTS; do
  case $part in
    steps)
      python3 -m core.cost.stepcost $SM --context 800 --steps 48 --repeats 3 \
        --json "$OUT/stepcost.json" 2>&1 | tee "$OUT/stepcost.log" ;;
    seed)
      bench seed --profile target-only --profile draft-only \
        --profile fixed-4-tv1 --profile fixed-6-tv1 --profile fixed-8-tv1 \
        --profile fixed-8-tv0.75 --profile fixed-8-tv0.5 ;;
    ours)
      bench ours --profile fixed-8-tv1:bonus=true --profile fixed-8-tv0.5:bonus=true \
        --profile fixed-4-tv1:bonus=true,dispatch=gemv --profile fixed-4-tv1:bonus=true,dispatch=gemm \
        --profile fixed-8-tv1:bonus=true,dispatch=gemv --profile fixed-8-tv1:bonus=true,dispatch=gemm \
        --profile fixed-8-tv1:k=7,bonus=true,dispatch=fastest \
        --profile fixed-8-tv1:bonus=true,fused_draft=true \
        --profile cost-aware:rule=mentored,tv_budget=1.0 \
        --profile fixed-8-tv1:k=15,k_max=15,bonus=true --profile fixed-8-tv1:k=31,k_max=31,bonus=true \
        --profile cost-aware:rule=mentored,tv_budget=1.0,k_max=31 ;;
    final)  # after the cost-aware fix (pooled prior, doubling probes) and pipelined tracing
      bench final --profile fixed-8-tv1:bonus=true --profile fixed-8-tv1:k=15,k_max=15,bonus=true \
        --profile fixed-8-tv1:k=15,k_max=15,bonus=true,fused_draft=true --profile fixed-8-tv1:k=31,k_max=31,bonus=true \
        --profile cost-aware:rule=mentored,tv_budget=1.0,k_max=31 --profile fixed-8-tv0.5:bonus=true \
        --profile cost-aware:rule=mentored,tv_budget=0.5,k_max=31 ;;
    peer)
      bench peer --profile target-only:temperature=0.0 --peer mlx-lm --peer-k 4 ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
done
