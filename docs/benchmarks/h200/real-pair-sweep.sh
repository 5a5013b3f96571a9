#!/usr/bin/env bash
# Issue 30 on the H200: `specdec-tui sweep` on the real Qwen2.5-Coder pair (1.5B Q4_K_M target,
# 0.5B draft: the GGUFs docs/benchmarks/real-pair/fetch.py pins), at the seed's protocol as far
# as a lease holds it: 256 new tokens, 3 seeds (1 invocation: the paired per-request ratios
# give the spread), 1 warm-up per cell and prompt, every shipped prompt (9), rows target-only,
# draft-only and TV 0/0.25/0.5/0.75/1 at fixed-8, greedy (where the TV budgets collapse to one
# greedy row) and T = 0.7. Repetition penalty off, bonus token on.
#
# Why fixed-8 and not cost-aware: the TV axis is read at one proposal length, so what changes
# from row to row is the budget alone (cost-aware moves k with acceptance, and with it the
# verification's kernel, which the seed could not separate from k), and fixed-8 is the seed's
# own TV row. The cost-aware rows come in real-pair-sweep-more.sh.
#
# Device plan (a 30-minute lease): the set-up calls of pack.sh (no --default-model), then
# staging the pair, done by the lead (the device set-up's stage-files tool (tools/device/README.md): ~34 calls, ~7 min; the files
# land in /root/stage/), then five calls on the same warm machine, each cut at LIMIT seconds
# (default 420) by SIGINT: the sweep rewrites its files after every prompt x temperature
# block, so a cut call keeps every finished block (its JSON says "complete": false).
# Estimate at ~2 s a 256-token target-only request of the 1.5B: a fixed-8 request costs 8
# draft steps of the 0.5B a round, ~5 s at TV 0 (few accepted), ~1.5 s at TV 1; a T = 0.7 block
# (7 cells x (1 warm-up + 3 timed)) ~85 s, a greedy block (3 cells) ~30 s. So:
#   PART=1  greedy, code-bugfix code-edit-pasted code-refactor-pasted code-refactor code-rename
#           (~2.5 min, and the first load converts the Q4_K_M GGUF through gguf-py once, a
#           minute or two, cached under SPECDEC_TUI_CACHE for the later calls)
#   PART=2  greedy, creative-800 creative-seed-vault math-boxes rewrite-paragraph (~2.5 min)
#   PART=3  T = 0.7, code-bugfix code-edit-pasted code-refactor-pasted    (~4.5 min)
#   PART=4  T = 0.7, code-refactor code-rename creative-800               (~4.5 min)
#   PART=5  T = 0.7, creative-seed-vault math-boxes rewrite-paragraph     (~4.5 min)
# (~19 min of calls in all; with the staging, a lease is full: PART=1 first, so a lease cut
# short still has the greedy rows of five prompts.)
# The calls (carry .device/kcache, and .whl for gguf-py when the machine lacks it; see
# lookup3.sh for the wheel), each starting with the kernel cache restored:
#   export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache; PART=1 bash docs/benchmarks/h200/real-pair-sweep.sh $OUT
#   ... PART=2 to PART=5 the same. A call cut at LIMIT ends with exit 124 (timeout's own).
# Each call brings back $OUT/real-pair-sweep-partN.tgz (the sweep's JSON, Markdown, SVG, CSV
# and log) and, in PART=1, the kernel cache's parts (kcache.sh save: at most 3 files).
# Here, afterwards: for N in 1 2 3 4 5: tar -xzf FILES_AT/real-pair-sweep-partN.tgz -C
#   docs/benchmarks/data/h200-real-pair-sweep/ ; then python3 docs/benchmarks/rawdata.py compress
#   (the data folder keeps its JSON xz'd) and PYTHONPATH=$PWD python3 docs/benchmarks/real-pair/make_page.py
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
PART=${PART:-1}
LIMIT=${LIMIT:-420}
STAGE=${STAGE:-/root/stage}
TARGET=$STAGE/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
DRAFT=$STAGE/qwen2.5-coder-0.5b-instruct.gguf
W=/tmp/real-pair-sweep-$PART; mkdir -p "$W"
export PYTHONUNBUFFERED=1 SPECDEC_TUI_CACHE=${SPECDEC_TUI_CACHE:-/root/sdcache}
mkdir -p "$SPECDEC_TUI_CACHE"
for f in "$TARGET" "$DRAFT"; do
  [ -f "$f" ] || { echo "$f is not staged: stage the pair first (the device set-up's stage-files tool (tools/device/README.md))" >&2; exit 2; }
done
python3 -c "import gguf" 2>/dev/null || python3 -m pip install -q --no-deps --no-index \
  --target /tmp/site .whl/gguf-*.whl 2>&1 | tail -2
bash tools/device/kcache.sh restore
case "$PART" in
  1) TEMPS=0; PROMPTS=(code-bugfix code-edit-pasted code-refactor-pasted code-refactor code-rename) ;;
  2) TEMPS=0; PROMPTS=(creative-800 creative-seed-vault math-boxes rewrite-paragraph) ;;
  3) TEMPS=0.7; PROMPTS=(code-bugfix code-edit-pasted code-refactor-pasted) ;;
  4) TEMPS=0.7; PROMPTS=(code-refactor code-rename creative-800) ;;
  5) TEMPS=0.7; PROMPTS=(creative-seed-vault math-boxes rewrite-paragraph) ;;
  *) echo "PART is 1 to 5" >&2; exit 2 ;;
esac
# A lease that cannot hold all five parts: ONLY="p1 p2 ..." and TEMPS=... pick the blocks.
[ -n "${ONLY:-}" ] && read -r -a PROMPTS <<< "$ONLY"
TEMPS=${TEMPS_OVERRIDE:-$TEMPS}
name=real-pair-sweep-part$PART
# SIGINT at LIMIT s: the sweep keeps its finished blocks; KILL 30 s later if it hangs.
timeout -s INT -k 30 "$LIMIT" python3 -m core.cli sweep --target "$TARGET" --draft "$DRAFT" \
  --tokens "${TOKENS:-256}" --seeds 3 --invocations 1 --warmup 1 --temperatures "$TEMPS" \
  --tv 0,0.25,0.5,0.75,1 --policies fixed-8 --repetition-penalty 1.0 \
  $(printf -- '--prompt-name %s ' "${PROMPTS[@]}") \
  --max-nll-delta 0.05 --min-task 0.5 --no-plot \
  --json "$W/$name.json" --markdown "$W/$name.md" --csv "$W/$name.csv" --force \
  > "$W/$name.log" 2>&1
echo "$name: exit $? ($(date +%T))"; tail -30 "$W/$name.log"
tar -czf "$OUT/$name.tgz" -C "$W" .
[[ "$PART" == 1 ]] && bash tools/device/kcache.sh save "$OUT"
ls -la "$OUT"
