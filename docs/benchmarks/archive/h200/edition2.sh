#!/usr/bin/env bash
# The H200 report, second edition (issue 14): the seed's table in three regimes (Qwen2.5 7B,
# 32B and 72B targets, random weights of the real shapes, with the 0.5B draft), with and
# without the bonus token, cost-aware k, the k x dispatch 2 x 2 (72B), and the mlx-lm peer
# paired request by request at 128 and 512 tokens. Every speculative row of every report
# carries its predicted speedup and efficiency (measured / predicted), from one calibration
# the bench runs at the prompt's context before the first request.
#
# After the two set-up calls of tools/device/pack.sh, one call per line, e.g.
#   export PYTHONPATH=/tmp/site:$PWD; REGIME=72b PARTS=seed bash docs/benchmarks/archive/h200/edition2.sh $OUT
# Parts (each one `specdec-tui bench`, one model build, its own target-only baseline):
#   seed      no bonus (the seed's engine): target-only, draft-only, fixed-4/6/8 at TV 1,
#             fixed-8 at TV 0.75 and 0.5; seed-a / seed-b: its first two / last three
#             speculative rows, for targets whose requests are too slow for one 10-min call
#   bonus     the same speculative rows with the bonus token; bonus-a / bonus-b likewise
#   cost      cost-aware k <= 31 at TV 1 and 0.5 (bonus), fixed-15 at TV 1 for reference
#   dispatch  k in {4, 8} x dispatch in {gemv, gemm}, and auto at both k (TV 1, bonus)
#   key       the headline rows in one call (72B): target-only, fixed-8 at TV 1 without and
#             with the bonus, k = 15 and 31 at TV 1, fixed-8 at TV 0.5 (~65-70% accepted), and
#             cost-aware k <= 15 at TV 0.5
#   peer      greedy: ours against mlx-lm's generate_step and speculative_generate_step
#             (k = 4), ABAB per seed, 3 seeds x 2 invocations = 6 pairs per loop
# REGIME: 7b | 32b | 72b (default 7b); TOKENS (default 256; the peer part: PEER_TOKENS,
# default "128 512"); SEEDS (default 3). Each part writes REGIME-PART.md into $OUT and adds
# its JSON, Markdown and log to $OUT/edition2-REGIME.tgz (the device brings back 8 files).
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
# A kernel cache carried in .device/kcache (kcache.sh) spares this call the compiles.
bash tools/device/kcache.sh restore
W=/tmp/edition2; mkdir -p "$W"
export PYTHONUNBUFFERED=1
REGIME=${REGIME:-7b}
M=${M:-"--target shape:qwen2.5-$REGIME --draft shape:qwen2.5-0.5b"}
T=${TOKENS:-256}
PARTS=${PARTS:-"seed bonus cost"}
python3 -c "import mlx.core as mx; print(mx.default_device(), mx.device_info().get('device_name'))" || exit 3

bench() {  # bench NAME TOKENS [bench flags...]
  local name="$REGIME-$1" tokens=$2; shift 2
  python3 -m core.cli bench $M --prompt-name creative-800 --tokens "$tokens" --seeds "${SEEDS:-3}" \
    --invocations 1 --warmup 1 "$@" \
    --json "$W/$name.json" --markdown "$W/$name.md" 2>&1 | tee "$W/$name.log" "$OUT/$name.log"
  cp "$W/$name.md" "$OUT/" 2>/dev/null
  tar -czf "$OUT/edition2-$REGIME.tgz" -C "$W" .
}

SEED_A="--profile fixed-4-tv1 --profile fixed-6-tv1"
SEED_B="--profile fixed-8-tv1 --profile fixed-8-tv0.75 --profile fixed-8-tv0.5"
BONUS_A="--profile fixed-4-tv1:bonus=true --profile fixed-6-tv1:bonus=true"
BONUS_B="--profile fixed-8-tv1:bonus=true --profile fixed-8-tv0.75:bonus=true --profile fixed-8-tv0.5:bonus=true"
for part in $PARTS; do
  case $part in
    seed)    bench seed "$T" --profile target-only --profile draft-only $SEED_A $SEED_B ;;
    seed-a)  bench seed-a "$T" --profile target-only --profile draft-only $SEED_A ;;
    seed-b)  bench seed-b "$T" --profile target-only $SEED_B ;;
    bonus)   bench bonus "$T" --profile target-only $BONUS_A $BONUS_B ;;
    bonus-a) bench bonus-a "$T" --profile target-only $BONUS_A ;;
    bonus-b) bench bonus-b "$T" --profile target-only $BONUS_B ;;
    cost)
      bench cost "$T" --profile target-only \
        --profile cost-aware:rule=mentored,tv_budget=1.0,k_max=31 \
        --profile cost-aware:rule=mentored,tv_budget=0.5,k_max=31 \
        --profile fixed-8-tv1:k=15,k_max=15,bonus=true ;;
    key)
      bench key "$T" --profile target-only --profile fixed-8-tv1 \
        --profile fixed-8-tv1:bonus=true --profile fixed-8-tv1:k=15,k_max=15,bonus=true \
        --profile fixed-8-tv1:k=31,k_max=31,bonus=true --profile fixed-8-tv0.5:bonus=true \
        --profile cost-aware:rule=mentored,tv_budget=0.5,k_max=15 ;;
    dispatch)
      bench dispatch "$T" --profile target-only \
        --profile fixed-4-tv1:bonus=true,dispatch=gemv --profile fixed-4-tv1:bonus=true,dispatch=gemm \
        --profile fixed-8-tv1:bonus=true,dispatch=gemv --profile fixed-8-tv1:bonus=true,dispatch=gemm \
        --profile fixed-4-tv1:bonus=true --profile fixed-8-tv1:bonus=true ;;
    peer)
      for pt in ${PEER_TOKENS:-128 512}; do
        bench "peer-$pt" "$pt" --invocations 2 --profile target-only:temperature=0.0 \
          --peer mlx-lm --peer-k 4
      done ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
done
