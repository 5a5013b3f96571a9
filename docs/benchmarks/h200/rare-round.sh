#!/usr/bin/env bash
# Issue 28, finding 7: what a speculative round costs after a stretch of plain target steps,
# against the same round back to back (rare_round.py, beside this script), on the default
# model, once per MLX CUDA setting (MLX reads them once a process): VARIANTS names them,
# default "default nographs". Each ~40 s with a restored kernel cache.
# On a machine set up by pack.sh (all three set-up calls), carrying .device/kcache:
#   export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache
#   bash docs/benchmarks/h200/rare-round.sh $OUT
# Writes $OUT/rare-round-<variant>.json and .log.
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
bash tools/device/kcache.sh restore
for v in ${VARIANTS:-default nographs}; do
  case "$v" in
    default) env=() ;;
    nographs) env=(MLX_USE_CUDA_GRAPHS=0) ;;
    ops20) env=(MLX_MAX_OPS_PER_BUFFER=20) ;;
    ops400) env=(MLX_MAX_OPS_PER_BUFFER=400) ;;
    grow) env=(GROW=1) ;;
    *) echo "unknown variant $v" >&2; exit 2 ;;
  esac
  echo "== $v ${env[*]}"
  env "${env[@]}" timeout "${TIMEOUT_S:-200}" python3 docs/benchmarks/h200/rare_round.py \
    "$OUT/rare-round-$v.json" 2>&1 | tee "$OUT/rare-round-$v.log" | tail -40
done
bash tools/device/kcache.sh save "$OUT"
