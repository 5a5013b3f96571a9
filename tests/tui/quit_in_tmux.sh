#!/usr/bin/env bash
# Issue 32, row 14, end to end: the real app (real MLX engine thread) in tmux, a message sent,
# ctrl+q pressed at a random point while the turn generates; N tries, each one's exit status.
# A clean quit is exit 0; the crashes this guards against were 134 ("terminate called without
# an active exception") and 139 (segfault). Not collected by pytest (minutes of real models).
#   tests/tui/quit_in_tmux.sh                    # 20 tries on the default pair, fixed-4-tv1
#   N=5 ARGS="--target shape:tiny --draft shape:tiny-draft" tests/tui/quit_in_tmux.sh
set -u
N=${N:-20}
BIN=${BIN:-.venv/bin/specdec-tui}
ARGS=${ARGS:---profile fixed-4-tv1}  # fixed k: rounds stream at once (cost-aware calibrates first)
work=$(mktemp -d)
clean=0
mid=0
pane() { tmux capture-pane -p -t "$1" 2>/dev/null; }
for i in $(seq 1 "$N"); do
  s="specdec-quit-$$-$i"
  rm -f "$work/rc"
  tmux new-session -d -s "$s" -x 200 -y 50 \
    "$BIN --profiles-dir $work/profiles $ARGS; echo \$? > $work/rc; sleep 3"
  for _ in $(seq 1 900); do pane "$s" | grep -q "● ready" && break; sleep 0.2; done
  tmux send-keys -t "$s" "Tell me a long story about a lighthouse keeper and the sea." Enter
  for _ in $(seq 1 600); do pane "$s" | grep -q "generating: round [1-9]" && break; sleep 0.05; done
  sleep "0.$((RANDOM % 10))"  # somewhere inside the turn
  pane "$s" | grep -q "generating: round" && mid=$((mid + 1)) && was="mid-turn" || was="after the turn"
  tmux send-keys -t "$s" C-q
  for _ in $(seq 1 1200); do [ -s "$work/rc" ] && break; sleep 0.05; done
  rc=$(cat "$work/rc" 2>/dev/null || echo "no exit within 60 s")
  last=$(pane "$s" | grep -v '^\s*$' | tail -2 | tr '\n' ' ')  # Textual draws on stderr: the
  echo "try $i: ctrl+q $was, exit $rc; last lines: $last"         # crash text lands here
  [ "$rc" = 0 ] && clean=$((clean + 1))
  tmux kill-session -t "$s" 2>/dev/null
done
echo "$clean of $N clean exits ($mid pressed mid-turn)"
[ "$clean" = "$N" ]
