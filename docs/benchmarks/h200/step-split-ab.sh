#!/usr/bin/env bash
# A plain step's host pieces (step_split.py, beside this) in two trees of the project, one
# process after the other, alternated per prompt: OLD, NEW, OLD, NEW. Why two trees and not a
# setting: a change to the loop's host work changes no decision, so it has no setting to flip
# inside one bench; what it changes is microseconds a step, which step_split's medians over
# every plain step of every request resolve where E2E pairs cannot (run 16's A/A noise:
# σ = 0.1-0.2 a pair). Each process interleaves its rows by seed, as the bench does.
#
# On the device, after pack.sh's set-up calls, carrying .device/kcache and the old tree:
#   here:  rm -rf .device/old && mkdir -p .device/old && git archive OLD_COMMIT core profiles \
#            docs/benchmarks/h200/step_split.py docs/benchmarks/h200/round_autopsy.py \
#            | tar -x -C .device/old
#   there: export SPECDEC_TUI_CACHE=/root/sdcache
#          bash docs/benchmarks/h200/step-split-ab.sh .device/old $OUT   (it restores the kernel cache)
# Environment: PROMPTS ("code-bugfix creative-seed-vault"), TEMPERATURE (0.7), SEEDS (3),
# ROWS ("target-only default lookup hybrid-cost-aware cost-aware"), REPEATS (2: OLD, NEW
# pairs a prompt). Writes $OUT/step-split-ab.tgz (ss-<old|new>-<prompt>-<i>.json and the log).
set -uo pipefail
OLD=${1:?the old tree}; OUT=${2:-/tmp/out}; mkdir -p "$OUT"
W=/tmp/step-split-ab; rm -rf "$W"; mkdir -p "$W"
export PYTHONUNBUFFERED=1 TEMPERATURE=${TEMPERATURE:-0.7} SEEDS=${SEEDS:-3}
export ROWS=${ROWS:-"target-only default lookup hybrid-cost-aware cost-aware"}
here=$PWD
PYTHONPATH=/tmp/site:$here bash tools/device/kcache.sh restore  # nothing compiles twice
for P in ${PROMPTS:-code-bugfix creative-seed-vault}; do
  for i in $(seq 1 "${REPEATS:-2}"); do
    for V in old new; do
      tree=$here; [[ $V == old ]] && tree=$(cd "$OLD" && pwd)
      echo "== $V $P $i ($(date -u +%T))" | tee -a "$W/log.txt"
      (cd "$tree" && PROMPT=$P PYTHONPATH=/tmp/site:$tree \
        timeout 200 python3 docs/benchmarks/h200/step_split.py "$W/ss-$V-$P-$i.json") \
        2>&1 | grep -v '^\s*$' | tail -6 | tee -a "$W/log.txt"
    done
  done
done
tar -czf "$OUT/step-split-ab.tgz" -C "$W" .
cp "$W/log.txt" "$OUT/step-split-ab.log"
ls -la "$OUT"
