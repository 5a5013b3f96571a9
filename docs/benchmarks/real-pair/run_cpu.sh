#!/usr/bin/env bash
# The real pair's acceptance, TV sweep, NLL and task success on this machine's CPU, one bench
# report per shipped prompt (raw JSON + the bench's Markdown) into docs/benchmarks/data/.
#
#   docs/benchmarks/real-pair/run_cpu.sh [PROMPT...]      (default: every shipped prompt)
#
# PAIR: the folder fetch.py wrote (default $SPECDEC_TUI_CACHE/real-pair, else ~/.cache/...);
# TOKENS (default 64), SEEDS (default 2), OUT (default docs/benchmarks/data/real-pair-cpu-DATE).
# Rows: greedy at T = 0, and the mentored rule at T = 0.7 with TV budgets 0, 0.25, 0.5, 0.75
# and 1; k = 4, bonus token on, repetition penalty off; the bench adds target-only. Acceptance
# does not depend on the machine, so no timing is trusted here (one invocation, no warm-up,
# no trace, no prediction: make_page.py prices the rows with the H200's curve instead).
# Slow on a 2-core CPU (the 1.5B decodes a few tokens a second): run it under nice.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${PYTHON:-python3}
PAIR=${PAIR:-${SPECDEC_TUI_CACHE:-$HOME/.cache/specdec-tui}/real-pair}
TARGET=$PAIR/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
DRAFT=$PAIR/qwen2.5-coder-0.5b-instruct.gguf
TOKENS=${TOKENS:-64}
SEEDS=${SEEDS:-2}
OUT=${OUT:-docs/benchmarks/data/real-pair-cpu-$(date +%F)}
mkdir -p "$OUT"
if [ $# -gt 0 ]; then PROMPTS=("$@"); else
  mapfile -t PROMPTS < <(PYTHONPATH=$PWD $PY -c 'from core.bench import prompt_names; print("\n".join(prompt_names()))')
fi
BASE="fixed-4-tv1:k=4,bonus=true,repetition_penalty=1.0"
ROWS=(--profile "$BASE,rule=greedy,temperature=0")
for tv in 0 0.25 0.5 0.75 1; do
  ROWS+=(--profile "$BASE,rule=mentored,temperature=0.7,tv_budget=$tv")
done
for p in "${PROMPTS[@]}"; do
  [ -s "$OUT/$p.json" ] && { echo "$p: done already"; continue; }
  echo "$p: $(date +%T)"
  PYTHONPATH=$PWD nice -n 10 $PY -m core.cli bench --target "$TARGET" --draft "$DRAFT" \
    --prompt-name "$p" --tokens "$TOKENS" --seeds "$SEEDS" --invocations 1 --warmup 0 \
    --no-traced --no-predict "${ROWS[@]}" --json "$OUT/$p.json" --markdown "$OUT/$p.md"
done
