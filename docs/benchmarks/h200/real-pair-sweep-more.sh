#!/usr/bin/env bash
# Issue 30 on the H200, after real-pair-sweep.sh on the same warm machine (the pair staged in
# /root/stage, the Q4_K_M GGUF already converted under SPECDEC_TUI_CACHE): the rows that script
# leaves out, in calls of at most ~6 minutes.
#   PART=A  the lookup and hybrid draft sources (cost-aware, 1..32 drafts a round, as the
#           shipped lookup / hybrid-cost-aware presets) at greedy and T = 0.7 with TV 0 and 1,
#           plus target-only, on the prompts that copy (rewrite-paragraph, code-edit-pasted,
#           code-refactor-pasted) and one that does not (creative-seed-vault): one sweep,
#           cut by SIGINT at LIMIT s (its finished blocks kept). ~4.5 min at ~2 s a request.
#   PART=B  transformers' assisted generation (assistant_model = the 0.5B GGUF, a constant 8
#           drafts a round) paired ABAB with our greedy fixed-8 row, and its plain greedy loop
#           with our target-only, on PROMPT (default creative-seed-vault; bench --peer
#           transformers-assisted, 3 seeds; transformers dequantizes both GGUFs to bf16 and
#           loads them per bench: ~1 min, then ~6 s a 256-token request of its own). ~4 min.
#   PART=C  transformers' prompt lookup (bench --peer transformers-pld, k 10, n-gram 3) paired
#           with our greedy lookup row, on PROMPT (default rewrite-paragraph). ~4 min.
#   PART=D  the cost-aware rows the main sweep leaves out: TV 0/0.5/1 at cost-aware-32 (the
#           draft model), T = 0.7, on code-refactor and creative-seed-vault. ~4 min.
# Each bench is cut at BENCH_LIMIT s (default 330) so one stall cannot eat the call; after each
# command every result so far is packed again into $OUT/real-pair-more-PART.tgz (one file back).
# torch and transformers are on the GPU machine; gguf and accelerate travel as wheels in .whl/
# (git-ignored: carry it; see lookup3.sh for the pip download line).
#   export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache; PART=A bash docs/benchmarks/h200/real-pair-sweep-more.sh $OUT
# Here: tar -xzf FILES_AT/real-pair-more-A.tgz -C docs/benchmarks/data/h200-real-pair-sweep/
# (and B, C, D), then python3 docs/benchmarks/rawdata.py compress (the data folder keeps its
# JSON xz'd) and PYTHONPATH=$PWD python3 docs/benchmarks/real-pair/make_page.py.
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
PART=${PART:-A}
LIMIT=${LIMIT:-330}
BENCH_LIMIT=${BENCH_LIMIT:-330}
STAGE=${STAGE:-/root/stage}
TARGET=$STAGE/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
DRAFT=$STAGE/qwen2.5-coder-0.5b-instruct.gguf
W=/tmp/real-pair-more-$PART; mkdir -p "$W"
export PYTHONUNBUFFERED=1 SPECDEC_TUI_CACHE=${SPECDEC_TUI_CACHE:-/root/sdcache}
T=${TOKENS:-256}
for f in "$TARGET" "$DRAFT"; do
  [ -f "$f" ] || { echo "$f is not staged: stage the pair first (the device set-up's stage-files tool (tools/device/README.md))" >&2; exit 2; }
done
for pkg in gguf accelerate; do
  python3 -c "import $pkg" 2>/dev/null || python3 -m pip install -q --no-deps --no-index \
    --target /tmp/site .whl/$pkg-*.whl 2>&1 | tail -2
done
bash tools/device/kcache.sh restore
pack() { tar -czf "$OUT/real-pair-more-$PART.tgz" -C "$W" .; }
sweep() {  # name, limit, sweep args...
  local name=$1 lim=$2; shift 2
  timeout -s INT -k 30 "$lim" python3 -m core.cli sweep --target "$TARGET" --draft "$DRAFT" \
    --tokens "$T" --seeds 3 --invocations 1 --warmup 1 --repetition-penalty 1.0 --no-plot \
    --max-nll-delta 0.05 --min-task 0.5 "$@" \
    --json "$W/$name.json" --markdown "$W/$name.md" --csv "$W/$name.csv" --force \
    > "$W/$name.log" 2>&1
  echo "$name: exit $? ($(date +%T))"; tail -20 "$W/$name.log"; pack
}
bench() {  # name, prompt, bench args...
  local name=$1 p=$2; shift 2
  timeout "$BENCH_LIMIT" python3 -m core.cli bench --target "$TARGET" --draft "$DRAFT" \
    --prompt-name "$p" --tokens "$T" --seeds 3 --invocations 1 --warmup 1 --temperature 0 \
    --repetition-penalty 1.0 --no-traced --no-predict "$@" \
    --json "$W/$name.json" --markdown "$W/$name.md" > "$W/$name.log" 2>&1
  echo "$name: exit $? ($(date +%T))"; tail -6 "$W/$name.log"; pack
}
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
  > "$W/versions.txt" 2>&1
case "$PART" in
  A) sweep real-pair-lookup-hybrid "$LIMIT" --sources lookup,hybrid --policies cost-aware-32 \
       --tv 0,1 --temperatures 0,0.7 --no-draft-only --prompt-name rewrite-paragraph \
       --prompt-name code-edit-pasted --prompt-name code-refactor-pasted \
       --prompt-name creative-seed-vault ;;
  B) p=${PROMPT:-creative-seed-vault}
     bench "real-pair-assisted-$p" "$p" --profile "target-only:temperature=0" \
       --profile "fixed-8-tv1:rule=greedy,temperature=0,bonus=true,repetition_penalty=1.0" \
       --peer transformers-assisted --peer-k 8 ;;
  C) p=${PROMPT:-rewrite-paragraph}
     bench "real-pair-pld-$p" "$p" --profile "target-only:temperature=0" \
       --profile "lookup:temperature=0,rule=greedy" --peer transformers-pld ;;
  D) sweep real-pair-cost-aware "$LIMIT" --policies cost-aware-32 --tv 0,0.5,1 \
       --temperatures 0.7 --no-draft-only --prompt-name code-refactor \
       --prompt-name creative-seed-vault ;;
  *) echo "PART is A, B, C or D" >&2; exit 2 ;;
esac
ls -la "$OUT"
