#!/usr/bin/env bash
# NOT RUN YET: written on the CPU for the next GPU session (no timing in this tree comes
# from it). Issue 57's question on the H200: do copies verified as a tree (draft_source
# "tree", core/drafting/tree.py) beat the one-chain lookup, and transformers' prompt lookup?
#
# On a machine set up by pack.sh --default-model (its set-up calls), kernel cache restored,
# PYTHONPATH exported (carry .device/kcache):
#   export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache
#   bash docs/benchmarks/h200/tree-ab.sh $OUT
# One bench per prompt and temperature, rows interleaved and paired by seed: target-only, the
# chain (`lookup`, cost-aware as its profile is), the tree (the same profile with
# draft_source=tree: its depth from the same policy, its nodes from the calibrated curve, at
# most the curve's largest measured rows - 1: 32 at the profile's k_max 32, the most
# Settings allows, so 64-node trees need a calibration timed to 65 rows first), and at T = 0 transformers' prompt lookup (`--peer transformers-pld`, its own ratio
# against its own target-only). Default model, 256 tokens, 5 seeds, 1 warm-up, repetition
# penalty 1.0, untraced; the prompts are the issue's: code-refactor-pasted, code-edit-pasted,
# code-rename, rewrite-paragraph. TEMPS (default "0.0 0.7") and PROMPTS narrow a call; a bench
# of 3 rows x 5 seeds x 256 tokens is ~40 s on the H200 (the never-slower runs), so both
# temperatures may fit one call of ~6 min (the transformers peer adds ~100 s a prompt: PEER=0
# leaves it out); BUDGET_S (default 300) starts no bench after it and
# lists the rest in skipped.txt.
# What to read from it (docs/benchmarks/lookup/tree-host-cost.md, "What the GPU run decides"):
# the tree row's speedup against the chain's per prompt and temperature, its tokens per
# verification (the JSON's per-source accepted counts and rows), and whether a round's
# verification at its node count costs what the curve promised (its rows' kernel times).
# Writes $OUT/tree-ab.tgz (every bench's JSON and Markdown, the log) and $OUT/tree-ab.log.
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/tree-ab; rm -rf "$W"; mkdir -p "$W"
export PYTHONUNBUFFERED=1
python3 -c "import mlx.core as mx; print('mlx', mx.__version__, mx.default_device())" || exit 3
bash tools/device/kcache.sh restore  # a carried kernel cache: nothing compiles twice
PROMPTS=${PROMPTS:-"code-refactor-pasted code-edit-pasted code-rename rewrite-paragraph"}
TEMPS=${TEMPS:-"0.0 0.7"}
BUDGET_S=${BUDGET_S:-300}
start=$(date +%s)
for T in $TEMPS; do
  for P in $PROMPTS; do
    tag="$P-t$T"
    if (( $(date +%s) - start > BUDGET_S )); then echo "$tag" >> "$W/skipped.txt"; continue; fi
    peer=(); [ "$T" = "0.0" ] && [ "${PEER:-1}" = 1 ] && peer=(--peer transformers-pld)
    echo "== $tag"
    timeout 240 python3 -m core.cli bench --target default --draft self:bits=4 \
      --prompt-name "$P" --tokens 256 --seeds 5 --invocations 1 --warmup 1 \
      --temperature "$T" --repetition-penalty 1.0 --no-quality --no-predict --no-traced \
      --profile target-only --profile lookup --profile lookup:draft_source=tree "${peer[@]}" \
      --json "$W/$tag.json" --markdown "$W/$tag.md" 2>&1 | tee -a "$W/tree-ab.log" | tail -12
  done
done
tar -czf "$OUT/tree-ab.tgz" -C "$W" .
cp "$W/tree-ab.log" "$OUT/" 2>/dev/null
ls -la "$OUT"
