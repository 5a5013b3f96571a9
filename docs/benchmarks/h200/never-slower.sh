#!/usr/bin/env bash
# Issue 28 on the H200: does the default ever make decoding slower? One call of <= 8 minutes
# on a machine set up by pack.sh --default-model (its set-up calls: three or four), kernel cache
# restored (kcache.sh), PYTHONPATH exported:
#   export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache
#   bash tools/device/kcache.sh restore; bash docs/benchmarks/h200/never-slower.sh $OUT
# (carry .device/kcache). Rows, in one bench per prompt and temperature: target-only, the
# app's default (what `specdec-tui` runs without --profile: first_run_settings(), run 4 on k 0..32), lookup,
# hybrid-cost-aware (k 0..32) and the draft model alone (cost-aware); 256 tokens, 3 seeds,
# 1 warm-up, interleaved (each seed runs every row before the next seed) and paired by seed;
# repetition penalty 1.0 on every row; no traced, quality or prediction passes.
# PART=i/n runs the i-th of n parts (SEEDS=5: PART=1/3, 2/3, 3/3, 6 benches a call).
# Two calls run every shipped prompt (9) at both temperatures (18 benches, ~30 s each with
# 3 seeds): PART=1 the first 9 benches (the prompts first), PART=2 the other 9, each
# call starting no bench after BUDGET_S (default 270 s; the call ends within ~300 s plus the
# pair's load) and listing the benches it could not start in skipped.txt. The heuristic
# `hybrid` preset (not the default, unguarded) is not run.
# The engine keeps each row's measured guard across its requests (issue 28): the warm-up and
# the seeds before a seed are what a request starts from, as a chat's later turns; each
# request's carried rounds are in its JSON (`guard.<source>.earlier_rounds`), and the call's
# method.txt says so. FRESH_GUARD=1 gives every request a fresh guard instead (the first
# request of a chat, every time).
# TRACED=1 gives each row its one traced request per seed too (per-round phases in the JSON,
# `trace` and `phase_ms`; ~1 more request a row): PROMPTS="math-boxes code-bugfix" TRACED=1
# BUDGET_S=250 splits the model rounds' cost that docs/benchmarks/never-slower.md leaves open.
# An A/B switch in never_slower.py's AB_ROWS (none now: the five that ran are decided,
# docs/decisions/) adds the default and the lookup with one setting flipped to every bench.
# DROP="hybrid-cost-aware cost-aware" leaves those rows out (an A/B of the default and the
# lookup then fits every prompt of one temperature in a call: run 14).
# Writes $OUT/never-slower.tgz (every bench's JSON and Markdown, summary.md, method.txt,
# skipped.txt, the log; packed after the run) and $OUT/summary.md and $OUT/never-slower.log.
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/never-slower; rm -rf "$W"; mkdir -p "$W"
export PYTHONUNBUFFERED=1
python3 -c "import mlx.core as mx; print('mlx', mx.__version__, mx.default_device())"
bash tools/device/kcache.sh restore  # a carried kernel cache: nothing compiles twice
export BUDGET_S=${BUDGET_S:-270}
timeout ${TIMEOUT_S:-420} python3 docs/benchmarks/h200/never_slower.py "$W" 2>&1 | tee "$W/never-slower.log" | grep -v '^\s*$' | tail -40
tar -czf "$OUT/never-slower.tgz" -C "$W" .
cp "$W/summary.md" "$W/method.txt" "$W/never-slower.log" "$OUT/" 2>/dev/null
ls -la "$OUT"
