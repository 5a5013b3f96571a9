#!/usr/bin/env bash
# Which minimum match should the lookup require? Acceptance, drafts per round and the share of
# rounds that copy are the same on any machine (greedy), so this runs on a CPU, with k chosen
# and the speedup predicted from the H200's verify-cost curve for the same model and prompt
# (bench --curve, from docs/benchmarks/data/h200-2026-11-30/). Times measured here are the
# CPU's and say nothing about speed.
#   bash docs/benchmarks/lookup/min_match.sh OUTDIR [TOKENS]
set -euo pipefail
out="${1:?usage: min_match.sh OUTDIR [TOKENS]}"; tokens="${2:-256}"
mkdir -p "$out"
for prompt in code-edit-pasted rewrite-paragraph; do
  specdec-tui bench --target default --draft self:bits=4 --prompt-name "$prompt" \
    --tokens "$tokens" --seeds 1 --invocations 1 --warmup 0 --no-traced --no-quality \
    --temperature 0 --repetition-penalty 1.0 \
    --curve "docs/benchmarks/data/h200-2026-11-30/lookup-$prompt-t0.0.json.xz" \
    --profile target-only --profile lookup --profile lookup:lookup_min_match=3 \
    --profile lookup:lookup_min_match=4 --profile hybrid-cost-aware \
    --profile hybrid-cost-aware:lookup_min_match=3 \
    --json "$out/min-match-$prompt.json" --markdown "$out/min-match-$prompt.md" \
    > "$out/min-match-$prompt.log" 2>&1
done
