#!/usr/bin/env bash
# Builds the GPU checks and packs them for a GPU machine that has the CUDA 13 libraries
# but no Bazel and no build tools of ours (docs/gpu.md).
#
#   tools/gpu/pack.sh            build with --config=cuda -c opt, pack into .gpu/
#
# The checks are //runtime/cuda:gpu_probe (always first) and every target tagged
# "gpu_check" (a gtest binary or a benchmark). Tags set how device_check.sh runs one:
#   gpu_order_<n>    its place in the run (ascending n, then label; default 50)
#   gpu_timeout_<s>  its time limit (default 60 s)
#   gpu_memcheck     also run under compute-sanitizer --tool memcheck
#   gpu_bench        a benchmark (figures): run after the tests and their memcheck runs
# Binaries go to .gpu/bin/ (with the tools the checks start, PACKED_TOOLS), the files
# they read to .gpu/data/ (PACKED_DATA), their shared libraries (from ldd) to
# .gpu/lib/, except the C library family and the CUDA, cuBLAS and NCCL libraries,
# which come from the GPU machine; binaries are stripped. .gpu/manifest.tsv lists
# every check in run order and every file; tools/gpu/device_check.sh runs them. Extra
# `bazel build` flags may follow (e.g. --define cuda_archs=90,100,103).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PACK="$ROOT/.gpu"
# The pack travels to a GPU machine with the repository (about 4 MiB tracked), where
# the device tool carries 64 MiB in all; 48 leaves room to spare.
MAX_PACK_BYTES=$((48 * 1024 * 1024))
DEFAULT_TIMEOUT_S=60
DEFAULT_ORDER=50
PROBE=//runtime/cuda:gpu_probe
# What //tests/e2e:cuda_launch_test starts and reads on the GPU machine (beside it).
PACKED_TOOLS=(//tools:lockstep)
PACKED_DATA=(deploy/local/agg_cuda_tiny.yaml)
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

# Prints "label<TAB>timeout_s<TAB>memcheck<TAB>order<TAB>kind" (memcheck 0 or 1, kind
# test or bench) for every check in run order, the probe first. Reads the rules from
# `bazel query --output=build`: each starts with a "# <root>/<pkg>/BUILD.bazel:line:col"
# comment, then `name = ` and, when present, `tags = [...]`.
list_checks() {
  printf '%s\t%s\t0\t0\ttest\n' "$PROBE" 30
  bazel query --output=build 'attr(tags, "gpu_check", //...)' --curses=no --color=no 2>/dev/null |
    awk -v root="$ROOT/" -v dflt="$DEFAULT_TIMEOUT_S" -v dorder="$DEFAULT_ORDER" '
      function flush() {
        if (name != "") print "//" pkg ":" name "\t" timeout "\t" memcheck "\t" order "\t" kind
        name = ""
      }
      /^# \// {
        flush(); timeout = dflt; memcheck = 0; order = dorder; kind = "test"
        pkg = $2; sub(/\/BUILD(\.bazel)?:.*$/, "", pkg); sub("^" root, "", pkg)
      }
      /^  name = "/ { name = $3; gsub(/[",]/, "", name) }
      /"gpu_memcheck"/ { memcheck = 1 }
      /"gpu_bench"/ { kind = "bench" }
      /gpu_timeout_[0-9]+/ {
        match($0, /gpu_timeout_[0-9]+/); timeout = substr($0, RSTART + 12, RLENGTH - 12)
      }
      /gpu_order_[0-9]+/ {
        match($0, /gpu_order_[0-9]+/); order = substr($0, RSTART + 10, RLENGTH - 10)
      }
      END { flush() }' | sort -t $'\t' -k4,4n -k1,1
}

# Copies binary `path` to .gpu/bin/`name`, stripped, and adds its ldd closure (less what
# the GPU machine provides) to `libs`.
pack_binary() {
  local label="$1" path="$2" name="$3" dep
  [[ -x $path ]] || die "built $label but found no binary at $path"
  [[ ! -e $PACK/bin/$name ]] || die "two packed binaries are named $name"
  cp "$path" "$PACK/bin/$name"
  chmod u+w "$PACK/bin/$name"
  # Symbol tables only (an opt build has no debug info): about a fifth of a check.
  strip "$PACK/bin/$name" || die "strip $name failed"
  while read -r dep; do
    [[ -n $dep ]] || continue
    is_provided_lib "$(basename "$dep")" && continue
    libs["$(basename "$dep")"]="$dep"
  done < <(ldd "$path" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
  if ldd "$path" | grep 'not found' >/dev/null; then  # not -q: no SIGPIPE under pipefail
    ldd "$path" | grep 'not found' >&2
    die "$label has unresolved libraries here"
  fi
}

main() {
  command -v bazel >/dev/null || die "bazel is not installed (tools/lockstep setup)"
  [[ -x /usr/local/cuda/bin/nvcc ]] || die "no CUDA toolkit at /usr/local/cuda (nvcc is needed)"

  log "finding the checks"
  local checks
  checks="$(list_checks)" || die "bazel query failed"
  local labels=()
  local label timeout memcheck order kind
  while IFS=$'\t' read -r label timeout memcheck order kind; do labels+=("$label"); done <<<"$checks"
  log "${#labels[@]} checks: ${labels[*]}"

  log "bazel build ${BUILD_FLAGS[*]}"
  bazel build "${BUILD_FLAGS[@]}" "${labels[@]}" "${PACKED_TOOLS[@]}" --curses=no --color=no \
    --noshow_progress || die "the build failed"
  # The output directory of this configuration (bazel info would wait for the server).
  local bin_dir arch
  case "$(uname -m)" in x86_64) arch=k8 ;; *) arch="$(uname -m)" ;; esac
  bin_dir="$(cd "$ROOT/bazel-out" && pwd -P)/$arch-opt/bin"
  [[ -d $bin_dir ]] || bin_dir="$(bazel info "${BUILD_FLAGS[@]}" bazel-bin 2>/dev/null)" ||
    die "found no output directory"

  rm -rf "$PACK"
  mkdir -p "$PACK/bin" "$PACK/lib" "$PACK/data"
  local manifest="$PACK/manifest.tsv"
  {
    echo "# Lockstep GPU pack: tools/gpu/device_check.sh runs the checks in this order."
    echo "# built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "# flags: ${BUILD_FLAGS[*]}"
    printf '# kind\tname\ttimeout_s\ttarget_or_source\tbytes\tmemcheck\tstage\n'
  } >"$manifest"

  local -A libs=()
  local name path
  while IFS=$'\t' read -r label timeout memcheck order kind; do
    name="${label##*:}"
    path="$bin_dir/${label#//}"
    path="${path/://}"
    pack_binary "$label" "$path" "$name"
    printf 'check\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$timeout" "$label" \
      "$(stat -c %s "$PACK/bin/$name")" "$memcheck" "$kind" >>"$manifest"
  done <<<"$checks"
  for label in "${PACKED_TOOLS[@]}"; do
    name="${label##*:}"
    path="$bin_dir/${label#//}"
    path="${path/://}"
    pack_binary "$label" "$path" "$name"
    printf 'tool\t%s\t-\t%s\t%s\n' "$name" "$label" "$(stat -c %s "$PACK/bin/$name")" >>"$manifest"
  done
  local file
  for file in "${PACKED_DATA[@]}"; do
    [[ -f $file ]] || die "no $file to pack"
    cp "$file" "$PACK/data/"
    printf 'data\t%s\t-\t%s\t%s\n' "$(basename "$file")" "$file" \
      "$(stat -c %s "$PACK/data/$(basename "$file")")" >>"$manifest"
  done

  local lib
  for lib in $(printf '%s\n' "${!libs[@]}" | sort); do
    cp -L "${libs[$lib]}" "$PACK/lib/$lib"
    printf 'lib\t%s\t-\t%s\t%s\n' "$lib" "${libs[$lib]}" "$(stat -c %s "$PACK/lib/$lib")" >>"$manifest"
  done
  cp tools/gpu/device_check.sh "$PACK/device_check.sh"

  local bytes
  bytes="$(du -sb "$PACK" | cut -f1)"
  log "pack: $PACK, ${#labels[@]} checks, ${#PACKED_TOOLS[@]} tools, ${#libs[@]} libraries, $((bytes / 1024 / 1024)) MiB ($bytes bytes)"
  if ((bytes > MAX_PACK_BYTES)); then
    die "the pack is $bytes bytes, over the $MAX_PACK_BYTES-byte limit (does a check link OpenBLAS?)"
  fi
}

main "$@"
