#!/usr/bin/env bash
# Issue 13 on the H200: the real default model (SmolLM2-135M-Instruct, Q4_1 GGUF) with no
# draft, the model draft (self:bits=4), the lookup and the hybrid, on two prompts that copy
# and one that does not, greedy and at T = 0.7 (lossless), 3 seeds, 256 new tokens.
# After the three calls of tools/device/pack.sh --default-model (the third runs this):
#   source .device/c/model.sh && bash docs/benchmarks/archive/h200/lookup.sh $OUT
# One bench per prompt and temperature, each writing its own files; the device brings back at
# most 8 files, so they are packed into $OUT/lookup.tgz after each (a cut call keeps them).
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
# A kernel cache carried in .device/kcache (kcache.sh) spares this call the compiles.
bash tools/device/kcache.sh restore
W=/tmp/lookup-results; mkdir -p "$W"
export PYTHONUNBUFFERED=1
T=${TOKENS:-256}
PROMPTS=${PROMPTS:-"code-edit-pasted rewrite-paragraph creative-seed-vault"}
TEMPS=${TEMPS:-"0.0 0.7"}
TAG=${TAG:-lookup}
ROWS=${ROWS:-"--profile target-only --profile lossless-fixed-4:bonus=true --profile lookup --profile hybrid-cost-aware"}
for temp in $TEMPS; do
  for p in $PROMPTS; do
    name="$TAG-$p-t$temp"
    python3 -m core.cli bench --target default --draft self:bits=4 --prompt-name "$p" \
      --tokens "$T" --seeds 3 --invocations 1 --warmup 1 --temperature "$temp" \
      --repetition-penalty 1.0 \
      $ROWS \
      --json "$W/$name.json" --markdown "$W/$name.md" 2>&1 | tee "$W/$name.log" | tail -12
    tar -czf "$OUT/$TAG.tgz" -C "$W" .
  done
done
