#!/usr/bin/env bash
# Builds the GPU checks and packs them for a GPU machine that has the CUDA 13 libraries
# but no Bazel and no build tools of ours (docs/gpu.md).
#
#   tools/gpu/pack.sh            build with --config=cuda -c opt, pack into .gpu/
#
# The checks are //runtime/cuda:gpu_probe (always first) and every target tagged
# "gpu_check" (a gtest binary or a benchmark). A tag "gpu_timeout_<seconds>" gives a
# check its own time limit (default 120 s); a tag "gpu_memcheck" also has it run under
# compute-sanitizer --tool memcheck (device_check.sh). Binaries go to .gpu/bin/, their
# shared libraries (from ldd) to .gpu/lib/, except the C library family and the CUDA,
# cuBLAS and NCCL libraries, which come from the GPU machine; binaries are stripped.
# .gpu/manifest.tsv lists every check and file; tools/gpu/device_check.sh runs them. Extra `bazel build` flags may
# follow (e.g. --define cuda_archs=90,100,103).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PACK="$ROOT/.gpu"
# The pack travels to a GPU machine with the repository (about 4 MiB tracked), where
# the device tool carries 64 MiB in all; 48 leaves room to spare.
MAX_PACK_BYTES=$((48 * 1024 * 1024))
DEFAULT_TIMEOUT_S=120
PROBE=//runtime/cuda:gpu_probe
BUILD_FLAGS=(--config=cuda -c opt "$@")

log() { printf '[pack] %s\n' "$*" >&2; }
die() { printf '[pack] error: %s\n' "$*" >&2; exit 1; }

# Libraries the GPU machine provides: the C library family, and CUDA/cuBLAS/NCCL.
is_provided_lib() {
  case "$1" in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux*) return 0 ;;
    libcuda.so* | libcudart.so* | libcublas* | libnccl*) return 0 ;;
  esac
  return 1
}

# Prints "label<TAB>timeout_s<TAB>memcheck" (0 or 1) for every check, the probe first.
# Reads the rules from `bazel query --output=build`: each starts with a
# "# <root>/<pkg>/BUILD.bazel:line:col" comment, then `name = ` and, when present,
# `tags = [...]`.
list_checks() {
  printf '%s\t%s\t0\n' "$PROBE" 60
  bazel query --output=build 'attr(tags, "gpu_check", //...)' --curses=no --color=no 2>/dev/null |
    awk -v root="$ROOT/" -v dflt="$DEFAULT_TIMEOUT_S" '
      function flush() { if (name != "") print "//" pkg ":" name "\t" timeout "\t" memcheck; name = "" }
      /^# \// {
        flush(); timeout = dflt; memcheck = 0
        pkg = $2; sub(/\/BUILD(\.bazel)?:.*$/, "", pkg); sub("^" root, "", pkg)
      }
      /^  name = "/ { name = $3; gsub(/[",]/, "", name) }
      /"gpu_memcheck"/ { memcheck = 1 }
      /gpu_timeout_[0-9]+/ {
        match($0, /gpu_timeout_[0-9]+/); timeout = substr($0, RSTART + 12, RLENGTH - 12)
      }
      END { flush() }' | sort
}

main() {
  command -v bazel >/dev/null || die "bazel is not installed (tools/lockstep setup)"
  [[ -x /usr/local/cuda/bin/nvcc ]] || die "no CUDA toolkit at /usr/local/cuda (nvcc is needed)"

  log "finding the checks"
  local checks
  checks="$(list_checks)" || die "bazel query failed"
  local labels=()
  local label timeout memcheck
  while IFS=$'\t' read -r label timeout memcheck; do labels+=("$label"); done <<<"$checks"
  log "${#labels[@]} targets: ${labels[*]}"

  log "bazel build ${BUILD_FLAGS[*]}"
  bazel build "${BUILD_FLAGS[@]}" "${labels[@]}" --curses=no --color=no --noshow_progress \
    || die "the build failed"
  # The output directory of this configuration (bazel info would wait for the server).
  local bin_dir arch
  case "$(uname -m)" in x86_64) arch=k8 ;; *) arch="$(uname -m)" ;; esac
  bin_dir="$(cd "$ROOT/bazel-out" && pwd -P)/$arch-opt/bin"
  [[ -d $bin_dir ]] || bin_dir="$(bazel info "${BUILD_FLAGS[@]}" bazel-bin 2>/dev/null)" ||
    die "found no output directory"

  rm -rf "$PACK"
  mkdir -p "$PACK/bin" "$PACK/lib"
  local manifest="$PACK/manifest.tsv"
  {
    echo "# Lockstep GPU pack: tools/gpu/device_check.sh runs the checks in this order."
    echo "# built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "# flags: ${BUILD_FLAGS[*]}"
    printf '# kind\tname\ttimeout_s\ttarget_or_source\tbytes\tmemcheck\n'
  } >"$manifest"

  local -A libs=()
  local name path dep
  while IFS=$'\t' read -r label timeout memcheck; do
    name="${label##*:}"
    path="$bin_dir/${label#//}"
    path="${path/://}"
    [[ -x $path ]] || die "built $label but found no binary at $path"
    [[ ! -e $PACK/bin/$name ]] || die "two checks are named $name"
    cp "$path" "$PACK/bin/$name"
    chmod u+w "$PACK/bin/$name"
    # Symbol tables only (an opt build has no debug info): about a fifth of a check.
    strip "$PACK/bin/$name" || die "strip $name failed"
    printf 'check\t%s\t%s\t%s\t%s\t%s\n' "$name" "$timeout" "$label" \
      "$(stat -c %s "$PACK/bin/$name")" "$memcheck" >>"$manifest"
    # The ldd closure, less what the GPU machine provides.
    while read -r dep; do
      [[ -n $dep ]] || continue
      is_provided_lib "$(basename "$dep")" && continue
      libs["$(basename "$dep")"]="$dep"
    done < <(ldd "$path" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
    if ldd "$path" | grep 'not found' >/dev/null; then  # not -q: no SIGPIPE under pipefail
      ldd "$path" | grep 'not found' >&2
      die "$label has unresolved libraries here"
    fi
  done <<<"$checks"

  local lib
  for lib in $(printf '%s\n' "${!libs[@]}" | sort); do
    cp -L "${libs[$lib]}" "$PACK/lib/$lib"
    printf 'lib\t%s\t-\t%s\t%s\n' "$lib" "${libs[$lib]}" "$(stat -c %s "$PACK/lib/$lib")" >>"$manifest"
  done
  cp tools/gpu/device_check.sh "$PACK/device_check.sh"

  local bytes
  bytes="$(du -sb "$PACK" | cut -f1)"
  log "pack: $PACK, ${#labels[@]} checks, ${#libs[@]} libraries, $((bytes / 1024 / 1024)) MiB ($bytes bytes)"
  if ((bytes > MAX_PACK_BYTES)); then
    die "the pack is $bytes bytes, over the $MAX_PACK_BYTES-byte limit (does a check link OpenBLAS?)"
  fi
}

main "$@"
