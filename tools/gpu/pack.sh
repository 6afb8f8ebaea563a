#!/usr/bin/env bash
# Builds the GPU checks and packs them for a GPU machine that has the CUDA 13 libraries
# but no Bazel and no build tools of ours (docs/gpu.md).
#
#   tools/gpu/pack.sh            build with --config=cuda --config=opt, pack into .gpu/
#   BAZEL="bazel --output_base=/tmp/b" tools/gpu/pack.sh    another Bazel command line
#
# The checks are //runtime/cuda:gpu_probe (always first) and every target tagged
# "gpu_check" (a gtest binary or a benchmark). Tags set how device_check.sh runs one:
#   gpu_order_<n>     its place in the run (ascending n, then label; default 50)
#   gpu_timeout_<s>   its time limit (default 60 s)
#   gpu_estimate_<s>  the time it should take on an H200 (default a third of its limit):
#                     device_check.sh runs it only when that much of its budget is left
#   gpu_memcheck      also run under compute-sanitizer --tool memcheck (after everything)
#   gpu_bench         a benchmark (figures)
# A cc_test is a gtest binary (gets gtest flags); anything else gets no arguments.
# Binaries are staged (stripped) with the tools the checks start (PACKED_TOOLS), the
# files they read (PACKED_DATA) and their shared libraries (from ldd), except the C
# library family and the CUDA, cuBLAS and NCCL libraries, which come from the GPU
# machine; tools/gpu/pack_archive.sh then compresses them into .gpu/pack.tar.xz beside
# .gpu/manifest.tsv (every check in run order and every file) and .gpu/device_check.sh,
# prints the sizes and fails when the device call would not fit them. Extra
# `bazel build` flags may follow (e.g. --define cuda_archs=90,100,103).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PACK="$ROOT/.gpu"
read -r -a BAZEL_CMD <<<"${BAZEL:-bazel}"
DEFAULT_TIMEOUT_S=60
DEFAULT_ORDER=50
PROBE=//runtime/cuda:gpu_probe
# What //tests/e2e:cuda_launch_test starts and reads on the GPU machine (beside it).
PACKED_TOOLS=(//tools:lockstep)
PACKED_DATA=(deploy/local/agg_cuda_tiny.yaml)
BUILD_FLAGS=(--config=cuda --config=opt "$@")

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

# Prints "label<TAB>timeout_s<TAB>memcheck<TAB>order<TAB>kind<TAB>estimate_s<TAB>gtest"
# (memcheck 0 or 1, kind test or bench, gtest 1 for a cc_test) for every check in run
# order, the probe first. Reads the rules from `bazel query --output=build`: each
# starts with a "# <root>/<pkg>/BUILD.bazel:line:col" comment, then `<rule class>(`,
# `name = ` and, when present, `tags = [...]`.
list_checks() {
  printf '%s\t%s\t0\t0\ttest\t3\t0\n' "$PROBE" 30
  "${BAZEL_CMD[@]}" query --output=build 'attr(tags, "gpu_check", //...)' --curses=no --color=no 2>/dev/null |
    awk -v root="$ROOT/" -v dflt="$DEFAULT_TIMEOUT_S" -v dorder="$DEFAULT_ORDER" '
      function flush() {
        if (estimate == "") estimate = int((timeout + 2) / 3)
        if (name != "") {
          print "//" pkg ":" name "\t" timeout "\t" memcheck "\t" order "\t" kind "\t" estimate "\t" gtest
        }
        name = ""
      }
      /^# \// {
        flush(); timeout = dflt; memcheck = 0; order = dorder; kind = "test"; estimate = ""
        gtest = 0
        pkg = $2; sub(/\/BUILD(\.bazel)?:.*$/, "", pkg); sub("^" root, "", pkg)
      }
      /^cc_test\(/ { gtest = 1 }
      /^  name = "/ { name = $3; gsub(/[",]/, "", name) }
      /gpu_estimate_[0-9]+/ {
        match($0, /gpu_estimate_[0-9]+/); estimate = substr($0, RSTART + 13, RLENGTH - 13)
      }
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

# Copies binary `path` to $STAGE/bin/`name`, stripped, and adds its ldd closure (less
# what the GPU machine provides) to `libs`.
pack_binary() {
  local label="$1" path="$2" name="$3" dep
  [[ -x $path ]] || die "built $label but found no binary at $path"
  [[ ! -e $STAGE/bin/$name ]] || die "two packed binaries are named $name"
  cp "$path" "$STAGE/bin/$name"
  chmod u+w "$STAGE/bin/$name"
  # Symbol tables only (an opt build has no debug info): about a fifth of a check.
  strip "$STAGE/bin/$name" || die "strip $name failed"
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
  command -v "${BAZEL_CMD[0]}" >/dev/null || die "${BAZEL_CMD[0]} is not installed (tools/lockstep setup)"
  [[ -x /usr/local/cuda/bin/nvcc ]] || die "no CUDA toolkit at /usr/local/cuda (nvcc is needed)"

  log "finding the checks"
  local checks
  checks="$(list_checks)" || die "bazel query failed"
  # On the CPU execution layer (--config=cuda_cpu, a dry run without a GPU) the
  # benchmarks are not built (bazel/cuda.bzl CUDA_GPU_ONLY): leave them out, by name.
  if [[ " ${BUILD_FLAGS[*]} " == *" --config=cuda_cpu "* ]]; then
    log "--config=cuda_cpu: the benchmarks are GPU-only, not packed:" \
      "$(awk -F'\t' '$5 == "bench" { printf "%s%s", sep, $1; sep = " " }' <<<"$checks")"
    checks="$(awk -F'\t' '$5 != "bench"' <<<"$checks")"
  fi
  local labels=()
  local label timeout memcheck order kind estimate gtest
  while IFS=$'\t' read -r label timeout memcheck order kind estimate gtest; do
    labels+=("$label")
  done <<<"$checks"
  log "${#labels[@]} checks: ${labels[*]}"

  log "${BAZEL_CMD[*]} build ${BUILD_FLAGS[*]}"
  "${BAZEL_CMD[@]}" build "${BUILD_FLAGS[@]}" "${labels[@]}" "${PACKED_TOOLS[@]}" --curses=no \
    --color=no --noshow_progress || die "the build failed"
  # The output directory of this configuration: through the bazel-out link for the
  # default Bazel (bazel info would wait for the shared server), else from bazel info.
  local bin_dir="" arch
  case "$(uname -m)" in x86_64) arch=k8 ;; *) arch="$(uname -m)" ;; esac
  [[ -z ${BAZEL:-} ]] && bin_dir="$(cd "$ROOT/bazel-out" && pwd -P)/$arch-opt/bin"
  [[ -d $bin_dir ]] || bin_dir="$("${BAZEL_CMD[@]}" info "${BUILD_FLAGS[@]}" bazel-bin 2>/dev/null)" ||
    die "found no output directory"

  STAGE="$(mktemp -d "${TMPDIR:-/tmp}/lockstep-gpu-stage.XXXXXX")"
  trap 'rm -rf "$STAGE"' EXIT
  mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/data"
  local manifest="$STAGE/manifest.tsv"
  {
    echo "# Lockstep GPU pack: tools/gpu/device_check.sh runs the checks in this order."
    echo "# built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "# flags: ${BUILD_FLAGS[*]}"
    printf '# kind\tname\ttimeout_s\ttarget_or_source\tbytes\tmemcheck\tstage\testimate_s\tgtest\n'
  } >"$manifest"

  local -A libs=()
  local name path
  while IFS=$'\t' read -r label timeout memcheck order kind estimate gtest; do
    name="${label##*:}"
    path="$bin_dir/${label#//}"
    path="${path/://}"
    pack_binary "$label" "$path" "$name"
    printf 'check\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$timeout" "$label" \
      "$(stat -c %s "$STAGE/bin/$name")" "$memcheck" "$kind" "$estimate" "$gtest" >>"$manifest"
  done <<<"$checks"
  for label in "${PACKED_TOOLS[@]}"; do
    name="${label##*:}"
    path="$bin_dir/${label#//}"
    path="${path/://}"
    pack_binary "$label" "$path" "$name"
    printf 'tool\t%s\t-\t%s\t%s\n' "$name" "$label" "$(stat -c %s "$STAGE/bin/$name")" >>"$manifest"
  done
  local file
  for file in "${PACKED_DATA[@]}"; do
    [[ -f $file ]] || die "no $file to pack"
    cp "$file" "$STAGE/data/"
    printf 'data\t%s\t-\t%s\t%s\n' "$(basename "$file")" "$file" \
      "$(stat -c %s "$STAGE/data/$(basename "$file")")" >>"$manifest"
  done

  local lib
  for lib in $(printf '%s\n' "${!libs[@]}" | sort); do
    cp -L "${libs[$lib]}" "$STAGE/lib/$lib"
    printf 'lib\t%s\t-\t%s\t%s\n' "$lib" "${libs[$lib]}" "$(stat -c %s "$STAGE/lib/$lib")" >>"$manifest"
  done
  log "staged ${#labels[@]} checks, ${#PACKED_TOOLS[@]} tools, ${#libs[@]} libraries"
  "$ROOT/tools/gpu/pack_archive.sh" "$STAGE" "$PACK"
}

main "$@"
