#!/usr/bin/env bash
# Issue 28, finding 7 on the H200: the calibration's row plan (core/dispatch/row_plan.py) that
# let the default reach k_max = 32. One call (typically 2-4 minutes; cut by TIMEOUT_S = 300 and
# 2 x CHAT_LIMIT_S = 75, under 8 minutes in all) on a machine set up by
# `pack.sh --default-model` (its three set-up calls); carry .device/kcache when one is kept
# (kcache.sh: without it the warm-up compiles the default's qmm kernels first, ~30 s each):
#   export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache
#   bash docs/benchmarks/h200/calib-plan.sh $OUT
# Parts:
#   1. calib_plan.py (beside this script): after a warm-up of rows 1..33, ROUNDS (3) rounds of
#      the every-row calibration (1..33) and the plan's (1..9, 12, 16, 17, 24, 32, 33), in
#      turn: their wall seconds, the plan curve's error at each unmeasured R against the
#      every-row median of the same round (and that median's spread across rounds: the noise
#      floor), and the cost-aware k each curve would choose (lookup and model drafts, per-
#      position acceptance 0.3..0.97) with the plan's choice priced on the every-row curve.
#   2. A first `chat` as a user starts it, the kernels warm and the curve cache empty: the old
#      default (k_max = 8, 9 rows) and the new (k_max = 32, the plan), each timed end to end
#      with the "calibrated in N s" line it prints.
# Writes into $OUT: calib-plan.json, calib-plan.log (everything printed), chat-k8.log,
# chat-k32.log, chat.json (per chat: wall seconds, the calibration's seconds, the kept curve's
# rows) and the kernel cache's parts (kcache.sh save) for later calls.
set -uo pipefail
OUT=${1:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
W=/tmp/calib-plan; rm -rf "$W"; mkdir -p "$W/profiles"
bash docs/benchmarks/h200/kcache.sh restore
timeout ${TIMEOUT_S:-300} python3 docs/benchmarks/h200/calib_plan.py "$OUT" 2>&1 | tee "$OUT/calib-plan.log" | tail -30
# the old default: the first run's settings at k_max = 8 (a profile: chat has no --k-max flag)
sed 's/^k_max = 32/k_max = 8/' profiles/hybrid-cost-aware.toml > "$W/profiles/default-k8.toml"
for part in k8 k32; do
  curves="$W/curves-$part"; mkdir -p "$curves"
  extra=(); [[ $part == k8 ]] && extra=(--profile default-k8)
  t0=$(date +%s.%N)
  SPECDEC_TUI_PROFILES="$W/profiles" SPECDEC_TUI_CURVES="$curves" timeout ${CHAT_LIMIT_S:-75} \
    python3 -m core.cli chat "${extra[@]}" --max-tokens 32 "Say hello." > "$OUT/chat-$part.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  python3 - "$part" "$rc" "$t0" "$t1" "$curves" "$OUT" <<'PY'
import glob, json, re, sys
part, rc, t0, t1, curves, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
log = open(f"{out}/chat-{part}.log", errors="replace").read().replace("\r", "\n")
m = re.findall(r"calibrated in ([0-9.]+) s", log)
kept = glob.glob(f"{curves}/curve-*.json")
rows = sorted(int(r) for r in json.load(open(kept[0]))["curve"]["times"]["auto"]) if kept else None
path = f"{out}/chat.json"
try:
    doc = json.load(open(path))
except FileNotFoundError:
    doc = {}
doc[part] = {"rc": rc, "wall_s": round(t1 - t0, 2), "calibrated_s": float(m[-1]) if m else None,
             "rows": rows}
json.dump(doc, open(path, "w"), indent=1)
print(part, doc[part])
PY
done
bash docs/benchmarks/h200/kcache.sh save "$OUT"
ls -la "$OUT"
