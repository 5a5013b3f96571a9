#!/usr/bin/env bash
# MLX's CUDA kernel cache, brought back from one device call and carried into the next, so a
# benchmark does not pay for the compiles twice (issue 21: on a fresh machine every bench of
# the default model stalled 40-76 s in NVRTC before its first token; warm, none did).
#
# MLX (0.32) compiles its CUDA kernels at first use and keeps them on disk in
# $MLX_PTX_CACHE_DIR, else <temp dir>/mlx/<mlx version>/ptx (mlx/backend/cuda/jit_module.cpp;
# core/runtime/compile_watch.py's kernel_cache_dir() says the same). A lent machine starts bare, so the cache
# travels as parts named kcache-mlx<version>-<sm_XY>.tar.xz.part-aa, -ab, ... (15 MiB each: a
# file brought back is at most 16 MiB; a call brings back at most 8 files). A cache is only
# restored on the MLX version and GPU architecture that wrote it (a cubin for another sm is
# refused by the driver).
#
# On the device, with PYTHONPATH=/tmp/site:$PWD (after pack.sh's set-up calls), in the call
# that carries .device/kcache (it rides with any later call: the parts are a few MiB):
#   bash tools/device/kcache.sh restore            # before anything runs
#   <benchmark> ; bash tools/device/kcache.sh save "$OUT"   # `;`: saved even on failure
# Here, from the repo root, once the call's files are back (the device tool's files_at folder):
#   bash tools/device/kcache.sh take FILES_AT       # its parts into .device/kcache/
# Then carry .device/kcache in the next call. `status` prints where the cache is and its size.
# The bench's JSON says whether a run compiled: environment.warmup.compiled and
# cache_growth_bytes (0 once warm).
set -euo pipefail
cmd=${1:-status}
root="$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
keep="$root/.device/kcache"
py=${PYTHON:-python3}

cache_dir() { "$py" -c "from core.runtime.compile_watch import kernel_cache_dir; print(kernel_cache_dir('cuda'))"; }
tag() {
  "$py" -c "import mlx.core as mx; from core.dispatch import current_backend as b
print(f'mlx{mx.__version__}-{b().architecture}')"
}

case "$cmd" in
  status)
    dir=$(cache_dir)
    echo "kernel cache: $dir ($(du -sh "$dir" 2>/dev/null | cut -f1 || echo none)) tag $(tag)"
    ls -la "$keep" 2>/dev/null || echo "nothing kept in $keep"
    ;;
  restore)
    dir=$(cache_dir); t=$(tag)
    shopt -s nullglob
    parts=("$keep"/kcache-"$t".tar.xz.part-*)
    if (( ${#parts[@]} == 0 )); then
      echo "no kernel cache for $t in $keep: this call compiles its kernels (a minute or more)"
      exit 0
    fi
    mkdir -p "$dir"
    cat "${parts[@]}" | tar -xJ -C "$dir"
    echo "restored the kernel cache for $t: $(find "$dir" -type f | wc -l) files," \
         "$(du -sh "$dir" | cut -f1) in $dir"
    ;;
  save)
    out=${2:?usage: kcache.sh save OUTDIR}
    dir=$(cache_dir); t=$(tag)
    if [[ ! -d "$dir" ]] || [[ -z "$(ls -A "$dir")" ]]; then
      echo "no kernel cache in $dir: nothing to save"; exit 0
    fi
    mkdir -p "$out"
    rm -f "$out"/kcache-"$t".tar.xz.part-*
    tar -cJf - -C "$dir" . | split -b 15M - "$out/kcache-$t.tar.xz.part-"
    n=$(ls "$out"/kcache-"$t".tar.xz.part-* | wc -l)
    echo "saved the kernel cache ($(du -sh "$dir" | cut -f1)) as $n part(s) of at most 15 MiB in $out"
    if (( n > 3 )); then
      echo "warning: $n parts leave few of the 8 files a call brings back for results" >&2
    fi
    ;;
  take)
    from=${2:?usage: kcache.sh take FILES_AT}
    shopt -s nullglob
    parts=("$from"/kcache-*.tar.xz.part-* "$from"/*/kcache-*.tar.xz.part-*)
    if (( ${#parts[@]} == 0 )); then
      echo "no kcache-*.tar.xz.part-* under $from" >&2; exit 2
    fi
    mkdir -p "$keep"
    for tg in $(for p in "${parts[@]}"; do basename "$p" | sed 's/\.tar\.xz\.part-.*//'; done | sort -u); do
      rm -f "$keep/$tg".tar.xz.part-*  # a newer cache replaces the older, never mixes with it
    done
    cp "${parts[@]}" "$keep"/ && chmod u+w "$keep"/*
    echo "kept $(ls "$keep" | wc -l) part(s) in $keep ($(du -sh "$keep" | cut -f1)): carry .device/kcache"
    ;;
  *)
    echo "usage: kcache.sh status | restore | save OUTDIR | take FILES_AT" >&2; exit 2
    ;;
esac
