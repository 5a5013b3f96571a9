#!/usr/bin/env bash
# The H200's verify-cost curve for the real pair's shapes (issue 23): Qwen2.5 1.5B target and
# 0.5B draft, random weights of the real shapes (the kernels and their cost are those of the
# real GGUF pair, whose files do not travel to the GPU machine). make_page.py prices the
# CPU-measured acceptance of docs/benchmarks/real-pair.md with it.
#
# After the two set-up calls of tools/device/pack.sh, one call:
#   export PYTHONPATH=/tmp/site:$PWD; bash docs/benchmarks/h200/real-pair-curve.sh $OUT
# Then, here: copy $OUT/curve-1.5b-0.5b.json to docs/benchmarks/data/ as
#   h200-curve-qwen2.5-1.5b-0.5b.json and run `python docs/benchmarks/rawdata.py compress`
# and run `PYTHONPATH=$PWD python3 docs/benchmarks/real-pair/make_page.py`.
set -euo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
# A kernel cache carried in .device/kcache (kcache.sh) spares this call the compiles.
bash tools/device/kcache.sh restore
python3 -m core.cli calibrate --target shape:qwen2.5-1.5b --draft shape:qwen2.5-0.5b \
  --rows 32 --json "$OUT/curve-1.5b-0.5b.json" 2>&1 | tee "$OUT/curve-1.5b-0.5b.log"
