#!/usr/bin/env bash
# Packs what a GPU benchmark needs onto the lent H200 machine, whose Python (3.12) has no
# package index and whose calls carry at most 64 MiB of files each: MLX 0.32.4 with its CUDA
# backend, mlx-lm 0.32.2, gguf (core/models/gguf_header.py imports it when the CLI starts) and
# our two small dependencies, and (with --default-model) the embedded default model's 98 MB
# GGUF, in parts that ride along with the set-up calls.
#
# Here, from the repo root (about 3 minutes; the model must be fetched: specdec-tui fetch):
#   bash tools/device/pack.sh [--default-model]
# Then, back to back on the device (an idle machine is released after 30 s):
#   1. carrying .device/a:  bash .device/a/stage.sh
#   2. carrying .device/b:  source .device/b/install.sh
#   3. carrying .device/c:  source .device/c/model.sh     (--default-model only)
# or, where this script says "set-up calls: 4" (the tree left three too little room, run 17):
#   3. carrying .device/c:  bash .device/c/stage.sh
#   4. carrying .device/d:  source .device/d/model.sh
# Later calls on the same warm machine start with (the commit as this script prints it: the
# machine's copy of .git can be an older HEAD than the tree, core/version.py):
#   export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache SPECDEC_TUI_COMMIT=<HEAD>
# A fresh machine compiles MLX's CUDA kernels at first use (a minute or more per model, said
# by the app, chat, bench and calibrate; kept out of every timed number). To pay for that once,
# not per lease, bring the kernel cache back and carry it (kcache.sh, beside this script):
#   end a benchmark call with   ; bash tools/device/kcache.sh save "$OUT"
#   here:                       bash tools/device/kcache.sh take FILES_AT
#   start the next call with    bash tools/device/kcache.sh restore  (carrying .device/kcache)
# Packing again keeps .device/kcache.
set -euo pipefail
# Every [project] dependency of pyproject.toml is in exactly one of these three lists, and
# every requirement of a packed wheel is packed or on the machine: tests/tools/device/test_pack_deps.py
# parses them (one array a line) and fails when they and pyproject.toml disagree.
# Packed as wheels (pyproject's pins; the CLI imports each of them):
PACK=("mlx==0.32.4" "mlx-lm==0.32.2" "gguf==0.19.0" "platformdirs>=4" "tomli-w>=1.0")
# MLX's CUDA backend (pyproject's `cuda` extra), unpacked into /tmp/site:
CUDA_PACK="mlx-cuda-13==0.32.4"
# Already installed on the lent machines (their image 'cuda'), with what they require:
MACHINE=(numpy jinja2 rich tokenizers transformers pyyaml tqdm requests protobuf sentencepiece)
# Imported by the app alone (tui/); the device runs the headless CLI, which never imports them:
APP_ONLY=(textual textual-plot textual-hires-canvas)
root="$(git rev-parse --show-toplevel)"
cd "$root"
exclude="$(git rev-parse --git-common-dir)/info/exclude"  # a worktree's .git is a file
grep -qxF '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"
rm -rf .device/a .device/b .device/c .device/d .device/tmp  # .device/kcache (kcache.sh) is kept
# The compressed CUDA backend and model are kept in .device/keep, named by what they hold, so
# packing again (after the tree changed) skips the slow part: xz of ~190 MB on a busy machine.
keep=.device/keep; mkdir -p "$keep"
cuda_xz="$keep/$CUDA_PACK.tar.xz"
mkdir -p .device/a .device/b .device/c .device/d .device/tmp
plat=(--platform manylinux_2_35_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${plat[@]}" -d "$1" "${@:2}" 2>&1 | grep -v '^WARNING' || true; }
dl .device/a "${PACK[@]}"
for want in "${PACK[@]}"; do  # a wheel pip could not find would fail later, on the device
  name=$(echo "${want%%[=<>]*}" | tr - _)
  ls .device/a/"$name"-*.whl >/dev/null 2>&1 || { echo "pack.sh: no wheel for $want" >&2; exit 2; }
done
if [[ ! -s "$cuda_xz" ]]; then
  dl .device/tmp "$CUDA_PACK"
  mkdir -p .device/tmp/x
  python3 -c "import glob, zipfile; zipfile.ZipFile(glob.glob('.device/tmp/mlx_cuda_13-*.whl')[0]).extractall('.device/tmp/x')"
  echo "compressing the CUDA backend (a minute on an idle machine)..."
  # Fixed order, times and owners: the archive's size (which PAYLOAD records) then depends
  # on the wheel alone, not on when or in what directory order it was unpacked.
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -cJf .device/tmp/cuda.tar.xz -C .device/tmp/x .
  mv .device/tmp/cuda.tar.xz "$cuda_xz"
else
  echo "reusing $cuda_xz"
fi
model=""
if [[ "${1:-}" == "--default-model" ]]; then
  gguf="${SPECDEC_TUI_CACHE:-$HOME/.cache/specdec-tui}/SmolLM2-135M-Instruct.Q4_1.gguf"
  test -f "$gguf" || { echo "fetch the default model first: specdec-tui fetch" >&2; exit 2; }
  model="$keep/$(basename "$gguf").xz"  # the default's bytes are pinned (fetch checks them)
  if [[ ! -s "$model" ]]; then
    echo "compressing the default model (xz saves ~12 MiB of its 94)..."
    xz -T0 -6 -c "$gguf" > .device/tmp/model.xz && mv .device/tmp/model.xz "$model"
  fi
fi
# Each call carries at most 64 MiB: the working tree that travels with it (tracked and
# untracked, not ignored, files) and its .device folder. pack_split.py (beside this script)
# fills three calls in order (four where three leave too little room), leaving PACK_MARGIN_MIB
# (default 1.0, pack_split.py MARGIN_MIB) a call for the tree to grow: the CUDA backend whole
# after call 2 (install.sh unpacks it), the model after the last call (model.sh).
# It refuses a payload larger than its PAYLOAD records (tests/tools/device/test_pack_fit.py holds the
# tree to those sizes) and says how full each call is.
python3 tools/device/pack_split.py split --wheels .device/a --cuda "$cuda_xz" \
  ${model:+--model "$model"} --margin-mib "${PACK_MARGIN_MIB:-1.0}"
rm -rf .device/tmp
cat > .device/a/stage.sh <<'SH'
set -e
mkdir -p /root/mlx-parts && cp .device/a/* /root/mlx-parts/
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
echo "staged part 1; start the second call within 30 s"
SH
cat > .device/b/install.sh <<'SH'
set -e
test -f /root/mlx-parts/stage.sh || { echo "part 1 is not staged here: run stage.sh first" >&2; return 1 2>/dev/null || exit 1; }
cp .device/b/*.part.* /root/mlx-parts/ 2>/dev/null || true
mkdir -p /tmp/site
cat $(ls /root/mlx-parts/cuda.part.* | sort -V) | tar -xJ -C /tmp/site
python3 -c "
import glob, zipfile
for w in glob.glob('/root/mlx-parts/*.whl'):
    zipfile.ZipFile(w).extractall('/tmp/site')"
export PYTHONPATH=/tmp/site:$PWD
# Bytecode now, as pip compiles it at install: unpacked wheels and a fresh tree otherwise
# compile every module at the first import, seconds of a first start (first-use.sh measures both).
python3 -m compileall -q -j 0 /tmp/site core tui > /dev/null 2>&1 || true
python3 -c "import mlx.core as mx; print('mlx', mx.__version__, mx.default_device(), mx.device_info().get('device_name'))"
SH
# The last call that carries parts reassembles the model; a call between install.sh's and
# that one only stages its parts.
last=c; ls .device/d/*.part.* >/dev/null 2>&1 && last=d
[[ $last == d ]] && cat > .device/c/stage.sh <<'SH'
set -e
test -f /root/mlx-parts/stage.sh || { echo "part 1 is not staged here: run stage.sh first" >&2; exit 1; }
cp .device/c/*.part.* /root/mlx-parts/
echo "staged part 3; start the fourth call within 30 s"
SH
[[ $last == c ]] && rmdir .device/d
cat > .device/$last/model.sh <<'SH'
set -e
export PYTHONPATH=/tmp/site:$PWD SPECDEC_TUI_CACHE=/root/sdcache
mkdir -p /root/sdcache
cp .device/[cd]/model.part.* /root/mlx-parts/ 2>/dev/null || true
cat $(ls /root/mlx-parts/model.part.* | sort -V) | xz -d \
  > /root/sdcache/SmolLM2-135M-Instruct.Q4_1.gguf
# The sha256 check the app runs before first use: a bad reassembly is refused, not loaded.
python3 -m core.cli fetch
SH
du -sh .device/a .device/b .device/c .device/d 2>/dev/null
dirty=$(git status --porcelain --untracked-files=no | head -c1)
echo "measuring calls: export SPECDEC_TUI_COMMIT=$(git rev-parse HEAD)${dirty:+  (uncommitted changes: commit first)}"
