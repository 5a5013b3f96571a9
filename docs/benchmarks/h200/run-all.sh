#!/usr/bin/env bash
# The whole H200 measurement in one command (device time is scarce): step costs (issue 8),
# then the seed's table with our improvements and the mlx-lm peer (issue 7).
# Run on the GPU machine after ../shared/device's two set-up runs, from the repo root:
#   export PYTHONPATH=/tmp/site:$PWD; bash docs/benchmarks/h200/run-all.sh "$OUT"
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
M=${M:-"--target shape:qwen2.5-7b --draft shape:qwen2.5-0.5b"}; T=${TOKENS:-256}; SM=${STEP_MODELS:-"--model shape:qwen2.5-0.5b --model shape:qwen2.5-7b"}
python3 -c "import mlx.core as mx; print(mx.default_device(), mx.device_info().get('device_name'))" || exit 3
if [ "${SKIP_STEPS:-0}" != 1 ]; then
python3 -m core.stepcost $SM --context 800 \
  --steps 48 --repeats 3 --json "$OUT/stepcost.json" 2>&1 | tee "$OUT/stepcost.log"
fi
S=(--profile target-only --profile draft-only
   --profile fixed-4-tv1 --profile fixed-6-tv1 --profile fixed-8-tv1
   --profile fixed-8-tv0.75 --profile fixed-8-tv0.5
   --profile fixed-8-tv1:bonus=true --profile fixed-8-tv0.5:bonus=true
   --profile fixed-4-tv1:bonus=true,dispatch=gemv --profile fixed-4-tv1:bonus=true,dispatch=gemm
   --profile fixed-8-tv1:bonus=true,dispatch=gemv --profile fixed-8-tv1:bonus=true,dispatch=gemm
   --profile fixed-8-tv1:bonus=true,fused_draft=true
   --profile cost-aware:rule=mentored,tv_budget=1.0,fused_draft=true)
python3 -m core.cli bench $M --prompt-name creative-800 --tokens $T --seeds 3 --invocations 1 \
  --warmup 1 "${S[@]}" --peer mlx-lm --peer-k 4 \
  --json "$OUT/bench.json" --markdown "$OUT/bench.md" --csv "$OUT/bench.csv" 2>&1 | tee "$OUT/bench.log"
