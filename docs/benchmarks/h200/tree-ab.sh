#!/usr/bin/env bash
# Issue 57's question on a GPU:
# do copies verified as a tree (draft_source "tree", core/drafting/tree.py) beat the
# one-chain lookup, transformers' prompt lookup and vLLM-style n-gram settings?
# Its version at 6e854e4 ran on an H100 on 2026-12-06 (two calls: docs/benchmarks/trees.md,
# "On the GPU"; the tree row calibrated to 33 rows, so trees of at most 32 nodes, no n-gram
# rows, no warm-up of the tree's shapes). Since then: the tree row's
# calibration reaches 65 rows (trees of up to 64 nodes), the tree's shapes are warmed before
# timing, two vLLM-style n-gram rows are added (docs/benchmarks/trees.md, "Reference rows"),
# and a bench may take 290 s (the first one compiles the tree's shapes; 290 + BUDGET_S 300
# stays inside a 600 s call).
#
# On a machine set up by pack.sh --default-model (its set-up calls), kernel cache restored,
# PYTHONPATH exported (carry .device/kcache):
#   export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache
#   bash docs/benchmarks/h200/tree-ab.sh $OUT
# One bench per prompt and temperature, rows interleaved and paired by seed: target-only, the
# chain (`lookup`, cost-aware as its profile is), the tree (the same profile with
# draft_source=tree: its depth from the same policy, its nodes from the calibrated curve,
# which a tree run measures to 65 rows, so up to 64 nodes), vLLM's n-gram proposer as the
# lookup's settings (its docs' example: fixed k 5, n-grams of 4; its default lengths: 5),
# and at T = 0 transformers' prompt lookup (`--peer transformers-pld`, its own ratio
# against its own target-only). Default model, 256 tokens, 5 seeds, 1 warm-up, repetition
# penalty 1.0, untraced; the prompts are the issue's: code-refactor-pasted, code-edit-pasted,
# code-rename, rewrite-paragraph. TEMPS (default "0.0 0.7") and PROMPTS narrow a call; a bench
# of 3 rows x 5 seeds x 256 tokens is ~40 s on the H200 (the never-slower runs), so one of 5
# rows ~70 s and a call of ~6 min fits about one temperature; BUDGET_S (default 300) starts no
# bench after it and lists the rest in skipped.txt (TEMPS=0.7 in a second call). PEER=0 leaves
# the transformers peer out (~100 s a prompt); TRACED=1 adds a traced request per seed, whose
# phase split (draft, verify, sample, cache) says where a tree round's time goes. NGRAM=0
# leaves the n-gram rows out, SEEDS (default 5) sets the seeds a bench pairs. Its runs of
# 2026-12-06 (calls 3-5, docs/benchmarks/trees.md "Why a tree round cost more") also had a row
# `lookup:draft_source=tree,tree_keep=refeed`: the A/B of docs/decisions/0009-tree-keep-refeed.md,
# whose winner is now the tree row's rule.
# What to read from it (docs/benchmarks/trees.md, "What the GPU run must decide"):
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
    traced=(--no-traced); [ "${TRACED:-0}" = 1 ] && traced=()
    ngram=(--profile "lookup:policy=fixed,k=5,lookup_min_match=4"
           --profile "lookup:policy=fixed,k=5,lookup_min_match=5")
    [ "${NGRAM:-1}" = 0 ] && ngram=()
    echo "== $tag"
    timeout 290 python3 -m core.cli bench --target default --draft self:bits=4 \
      --prompt-name "$P" --tokens 256 --seeds "${SEEDS:-5}" --invocations 1 --warmup 1 \
      --temperature "$T" --repetition-penalty 1.0 --no-quality --no-predict "${traced[@]}" \
      --profile target-only --profile lookup --profile lookup:draft_source=tree \
      "${ngram[@]}" "${peer[@]}" \
      --json "$W/$tag.json" --markdown "$W/$tag.md" 2>&1 | tee -a "$W/tree-ab.log" | tail -12
  done
done
tar -czf "$OUT/tree-ab.tgz" -C "$W" .
cp "$W/tree-ab.log" "$OUT/" 2>/dev/null
ls -la "$OUT"
