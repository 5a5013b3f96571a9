#!/usr/bin/env bash
# Issue 22 on the H200: every lookup and hybrid row against target-only, greedy and at
# T = 0.7, on the shipped prompts that copy (rewrite-paragraph, code-edit-pasted, code-refactor,
# and code-refactor-pasted: a pasted module returned with one rename) and on the creative one
# (nothing to copy: the no-loss check), 256 new tokens, 2 seeds, 1 warm-up; greedy benches on
# the copying prompts also run transformers' prompt lookup (k = 10, n-gram 3, the same GGUF in
# bf16) paired ABAB with our greedy lookup row in the same call (bench --peer transformers-pld).
#
# Two calls of at most 10 minutes, on a machine set up by pack.sh --default-model (its three
# set-up calls; the third brings the model). The machine has torch 2.11 and transformers 5.17;
# the gguf and accelerate packages (transformers' GGUF loading needs both) travel as wheels in
# .whl/ (ignored by git: carry it; if the machine already has accelerate, its wheel is unused):
#   here, once:   python3 -m pip download -q --no-deps --only-binary=:all: -d .whl gguf==0.19.0 accelerate==1.15.0
#   call 1 (carry .whl, .device/c):  source .device/c/model.sh && PART=1 bash docs/benchmarks/archive/h200/lookup3.sh $OUT
#   call 2 (same warm machine):      export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache
#                                    PART=2 bash docs/benchmarks/archive/h200/lookup3.sh $OUT
# PART=1: greedy, five prompts, the peer on the four that copy (~8 min: transformers' bf16
# requests take ~6 s at 256 tokens). PART=2: T = 0.7, five prompts, and the hybrid at T = 0.7 on
# rewrite-paragraph again under MLX_CUDA_GRAPH_CACHE_SIZE=4096 (the 2026-12-01 hybrid rows at
# T = 0.7 paid ~1.6x per target step and per verification against the lookup rows in the
# same call, which no host work in the traces explains; a graph-cache miss per round would).
# Each bench is cut at 150 s (timeout) so one stall cannot eat the call; after each, every
# result is packed again into $OUT/lookup3-partN.tgz (one file back per call, plus its log).
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
# A kernel cache carried in .device/kcache (kcache.sh) spares this call the compiles.
bash tools/device/kcache.sh restore
PART=${PART:-1}
W=/tmp/lookup3-$PART; mkdir -p "$W"
export PYTHONUNBUFFERED=1
T=${TOKENS:-256}
for pkg in gguf accelerate; do
  python3 -c "import $pkg" 2>/dev/null || python3 -m pip install -q --no-deps --no-index \
    --target /tmp/site .whl/$pkg-*.whl 2>&1 | tail -2
done
python3 -c "import torch, transformers, gguf, accelerate; print('torch', torch.__version__, 'transformers', transformers.__version__, 'gguf ok')" \
  2>&1 | tee "$W/versions.txt"
COPYING=${PROMPTS:-"rewrite-paragraph code-edit-pasted code-refactor-pasted code-refactor"}
ROWS="--profile target-only --profile lookup --profile hybrid-cost-aware"
bench() {  # name, temperature, prompt, extra args...
  local name=$1 temp=$2 p=$3; shift 3
  timeout 150 python3 -m core.cli bench --target default --draft self:bits=4 --prompt-name "$p" \
    --tokens "$T" --seeds 2 --invocations 1 --warmup 1 --temperature "$temp" \
    --repetition-penalty 1.0 --no-quality $ROWS "$@" \
    --json "$W/$name.json" --markdown "$W/$name.md" > "$W/$name.log" 2>&1
  echo "$name: exit $?"; tail -4 "$W/$name.log"
  tar -czf "$OUT/lookup3-part$PART.tgz" -C "$W" .
}
if [[ "$PART" == 1 ]]; then
  for p in $COPYING; do bench "lk3-$p-t0.0" 0.0 "$p" --peer transformers-pld; done
  bench "lk3-creative-seed-vault-t0.0" 0.0 creative-seed-vault
else
  for p in $COPYING creative-seed-vault; do bench "lk3-$p-t0.7" 0.7 "$p"; done
  MLX_CUDA_GRAPH_CACHE_SIZE=4096 ROWS="--profile target-only --profile hybrid-cost-aware" \
    bench "lk3-rewrite-paragraph-t0.7-graphcache4096" 0.7 rewrite-paragraph
fi

ls "$OUT" | head -8
