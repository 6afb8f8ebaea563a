#!/usr/bin/env bash
# The GPU acceptance run, on a machine with a GPU, its driver and the CUDA 13 libraries
# (CUDA runtime, cuBLAS, NCCL) but no Bazel: runs the checks that tools/gpu/pack.sh
# packed into .gpu/ (docs/gpu.md).
#
#   tools/gpu/device_check.sh [OUT_DIR]     (from the repository root, .gpu/ present)
#   .gpu/device_check.sh [OUT_DIR]          (the copy inside the pack works as well)
#
# 1. Finds the machine's CUDA runtime, cuBLAS/cuBLASLt and NCCL libraries (CUDA_HOME,
#    /usr/local/cuda*, the loader cache, Python packages such as torch's nvidia-*
#    wheels, then one bounded search of / for all that are still missing) and puts their
#    directories after the packed libraries in LD_LIBRARY_PATH.
# 2. Prints the driver, CUDA runtime, cuBLAS and NCCL versions and each GPU's name and
#    memory (gpu_probe; nvidia-smi too when present). Without a usable GPU it stops
#    there with exit status 1 (DEVICE_CHECK_WITHOUT_GPU=1 runs the checks anyway).
# 3. Runs, each under its own time limit and with LOCKSTEP_REQUIRE_GPU=1 (a GPU test
#    fails instead of skipping), logged to OUT_DIR/<check>.log: the tests in manifest
#    order (correctness first), then the tests tagged "gpu_memcheck" again under
#    compute-sanitizer --tool memcheck (from PATH, CUDA_HOME or /usr/local/cuda*; limit
#    twice the test's; without their *LongContext* cases; SKIP where the machine has no
#    compute-sanitizer or it says "Device not supported"), then the benchmarks.
# 4. Everything within DEVICE_CHECK_BUDGET_S (default 450 s, counted from the start of
#    the script): a check's limit is cut to what is left, and a check with less than
#    5 s left is NOT RUN (printed when it is reached, counted as failed).
# 5. Ends with a table (a benchmark's "goals:" line in its note), the line
#    "N passed, M failed" (", K not run" / ", S skipped" when there are) and exit status
#    0 only when nothing failed or was not run (SKIP is neither). Files over 64 MiB that
#    the checks left under OUT_DIR/tmp (models) are deleted, so the results stay small.
#
# Everything printed also goes to OUT_DIR/device_check.log (default OUT_DIR:
# ./gpu-run-<UTC time>); the script exits only once both have all of it.
set -uo pipefail

script_start=$(date +%s)
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -n ${LOCKSTEP_GPU_PACK:-} ]]; then
  PACK="$LOCKSTEP_GPU_PACK"
elif [[ -f $SCRIPT_DIR/manifest.tsv ]]; then
  PACK="$SCRIPT_DIR"
else
  PACK="$(cd "$SCRIPT_DIR/../.." && pwd)/.gpu"
fi
OUT_DIR="${1:-./gpu-run-$(date -u +%Y%m%dT%H%M%SZ)}"
BUDGET_S="${DEVICE_CHECK_BUDGET_S:-450}"
REQUIRED_LIBS=(libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2)

say() { printf '%s\n' "$*"; }

if [[ ! -f $PACK/manifest.tsv ]]; then
  say "device_check: no pack at $PACK (no manifest.tsv): run tools/gpu/pack.sh on the build machine and copy .gpu/ here" >&2
  exit 2
fi
mkdir -p "$OUT_DIR" || { say "device_check: cannot create $OUT_DIR" >&2; exit 2; }
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
exec > >(tee -a "$OUT_DIR/device_check.log") 2>&1
# On exit, close the pipe to tee and wait for it: otherwise the script can end before
# tee has written its last lines (the summary), and whoever reads them next misses them.
tee_pid=$!
finish() {
  local rc=$?
  exec >&- 2>&-
  wait "$tee_pid"
  exit "$rc"
}
trap finish EXIT

# The directory holding library $1 in the usual places, or nothing.
find_lib_dir() {
  local lib="$1" dir hit
  for dir in ${CUDA_HOME:+"$CUDA_HOME/lib64" "$CUDA_HOME/lib"} /usr/local/cuda/lib64 \
    /usr/local/cuda/lib /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib \
    /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [[ -e $dir/$lib ]] && { say "$dir"; return; }
  done
  hit="$(/sbin/ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l { print $NF; exit }')"
  [[ -n $hit ]] && { dirname "$hit"; return; }
  # pip wheels (nvidia-cuda-runtime, nvidia-cublas, nvidia-nccl-cu13, e.g. under torch).
  local py
  for py in python3 python; do
    command -v "$py" >/dev/null || continue
    hit="$(timeout 20 "$py" - "$lib" 2>/dev/null <<'PY'
import glob, os, site, sys
roots = set(site.getsitepackages() + [site.getusersitepackages()] + sys.path)
for root in sorted(r for r in roots if r and os.path.isdir(r)):
    for path in glob.glob(os.path.join(root, "nvidia", "**", sys.argv[1]), recursive=True):
        print(os.path.dirname(path)); sys.exit(0)
PY
)"
    [[ -n $hit ]] && { say "$hit"; return; }
  done
}

say "== Lockstep GPU acceptance run, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname)"
say "pack: $PACK"
grep '^# built\|^# flags' "$PACK/manifest.tsv" | sed 's/^# /pack /'
say "out: $OUT_DIR"
say "budget: ${BUDGET_S} s for the whole run"

lib_path="$PACK/lib"
missing=()
declare -A lib_dirs=()
for lib in "${REQUIRED_LIBS[@]}"; do
  dir="$(find_lib_dir "$lib")"
  if [[ -n $dir ]]; then lib_dirs[$lib]="$dir"; else missing+=("$lib"); fi
done
if ((${#missing[@]} > 0)); then
  # One bounded search of / for every library still missing.
  names=()
  for lib in "${missing[@]}"; do names+=(-o -name "$lib"); done
  while read -r hit; do
    [[ -n $hit && -z ${lib_dirs[$(basename "$hit")]:-} ]] && lib_dirs[$(basename "$hit")]="$(dirname "$hit")"
  done < <(timeout 60 find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path "$PACK" \) \
    -prune -o \( -false "${names[@]}" \) -print 2>/dev/null)
fi
missing=()
for lib in "${REQUIRED_LIBS[@]}"; do
  dir="${lib_dirs[$lib]:-}"
  if [[ -z $dir ]]; then
    missing+=("$lib")
    say "library $lib: NOT FOUND"
    continue
  fi
  say "library $lib: $dir"
  [[ :$lib_path: == *":$dir:"* ]] || lib_path="$lib_path:$dir"
done
export LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
driver="$(/sbin/ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" { print $NF; exit }')"
say "driver library libcuda.so.1: ${driver:-NOT FOUND in the loader cache}"
if command -v nvidia-smi >/dev/null; then
  timeout 30 nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version \
    --format=csv 2>&1 | sed 's/^/nvidia-smi: /'
else
  say "nvidia-smi: not installed"
fi

# Results, in run order: name, result, seconds, note.
names=() results=() seconds=() notes=()
record() { names+=("$1"); results+=("$2"); seconds+=("$3"); notes+=("$4"); }
not_run() {
  say ""
  say "== $1: NOT RUN ($2)"
  record "$1" "NOT RUN" 0 "$2"
}

# Runs one check with its timeout; records PASS, FAIL (exit status) or TIMEOUT. The
# command is the packed binary, or the words after the first two arguments.
run_check() {
  local name="$1" limit="$2" log="$OUT_DIR/$1.log" start end rc note goals
  shift 2
  local cmd=("$@")
  ((${#cmd[@]} > 0)) || cmd=("$PACK/bin/$name" --gtest_color=no)
  say ""
  say "== $name (timeout ${limit} s)"
  start=$(date +%s)
  (
    cd "$OUT_DIR" && mkdir -p "tmp/$name" &&
      TEST_TMPDIR="$OUT_DIR/tmp/$name" LOCKSTEP_REQUIRE_GPU=1 \
        timeout --kill-after=10 "$limit" "${cmd[@]}"
  ) >"$log" 2>&1
  rc=$?
  end=$(date +%s)
  cat "$log"
  note="$(grep -E '^\[  (PASSED|FAILED) +\]' "$log" | head -2 | tr -s ' ' | paste -sd ';' -)"
  goals="$(grep -m1 '^goals: ' "$log")"
  [[ -n $goals ]] && note="${note:+$note; }$goals"
  if grep -q 'error while loading shared libraries' "$log"; then
    note="$(grep -m1 'error while loading shared libraries' "$log" | sed 's/.*: //')"
  fi
  if ((rc == 124 || rc == 137)); then
    record "$name" TIMEOUT $((end - start)) "killed after ${limit} s"
  elif ((rc == 0)); then
    record "$name" PASS $((end - start)) "$note"
  else
    record "$name" FAIL $((end - start)) "exit $rc${note:+; $note}"
  fi
  return "$rc"
}

# The time left of the budget, in seconds.
left() { echo $((BUDGET_S - ($(date +%s) - script_start))); }

# Runs check $1 (limit $2, more words: the command) if the GPU and the budget allow.
maybe_run() {
  local name="$1" limit="$2" remaining
  shift 2
  if ((probe_ok == 0)) && [[ ${DEVICE_CHECK_WITHOUT_GPU:-0} != 1 ]]; then
    not_run "$name" "no usable GPU"
    return
  fi
  remaining=$(left)
  if ((remaining < 5)); then
    not_run "$name" "the ${BUDGET_S} s budget is spent"
    return
  fi
  ((limit > remaining)) && limit=$remaining
  run_check "$name" "$limit" "$@"
}

# The manifest's checks in run order: "check<TAB>name<TAB>timeout<TAB>target<TAB>bytes
# <TAB>memcheck<TAB>stage" (stage: test or bench; absent: test).
mapfile -t checks < <(awk -F'\t' '$1 == "check" { print $2 "\t" $3 "\t" ($6 == "" ? 0 : $6) "\t" ($7 == "" ? "test" : $7) }' \
  "$PACK/manifest.tsv")
probe_ok=1
for entry in "${checks[@]}"; do
  IFS=$'\t' read -r name limit memcheck stage <<<"$entry"
  [[ $name == gpu_probe ]] || continue
  if ! run_check "$name" "$limit"; then
    probe_ok=0
    say ""
    say "device_check: no usable GPU here (gpu_probe above says why${missing[*]:+; libraries not found: ${missing[*]}})."
    if [[ ${DEVICE_CHECK_WITHOUT_GPU:-0} != 1 ]]; then
      say "device_check: the checks need a GPU; not running them (DEVICE_CHECK_WITHOUT_GPU=1 runs them anyway)."
    fi
  fi
done

# 1. The tests.
for entry in "${checks[@]}"; do
  IFS=$'\t' read -r name limit memcheck stage <<<"$entry"
  [[ $name != gpu_probe && $stage == test ]] && maybe_run "$name" "$limit"
done

# 2. compute-sanitizer memcheck over the tests tagged gpu_memcheck.
sanitizer="$(command -v compute-sanitizer 2>/dev/null)"
for candidate in ${CUDA_HOME:+"$CUDA_HOME/bin/compute-sanitizer"} /usr/local/cuda/bin/compute-sanitizer \
  /usr/local/cuda-13*/bin/compute-sanitizer; do
  [[ -z $sanitizer && -x $candidate ]] && sanitizer="$candidate"
done
for entry in "${checks[@]}"; do
  IFS=$'\t' read -r name limit memcheck stage <<<"$entry"
  [[ $memcheck == 1 && $stage == test ]] || continue
  if [[ -z $sanitizer ]] && { ((probe_ok == 1)) || [[ ${DEVICE_CHECK_WITHOUT_GPU:-0} == 1 ]]; }; then
    record "$name.memcheck" SKIP 0 "no compute-sanitizer on this machine"
    continue
  fi
  count_before=${#names[@]}
  maybe_run "$name.memcheck" $((2 * limit)) "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$PACK/bin/$name" --gtest_color=no '--gtest_filter=-*LongContext*'
  if ((${#names[@]} > count_before)) && [[ ${results[${#results[@]} - 1]} != "NOT RUN" ]] &&
    grep -q 'Device not supported' "$OUT_DIR/$name.memcheck.log" 2>/dev/null; then
    results[${#results[@]} - 1]=SKIP
    notes[${#notes[@]} - 1]="compute-sanitizer: Device not supported"
  fi
done

# 3. The benchmarks.
for entry in "${checks[@]}"; do
  IFS=$'\t' read -r name limit memcheck stage <<<"$entry"
  [[ $stage == bench ]] && maybe_run "$name" "$limit"
done

# Large files the checks left behind (models) would only weigh down the results.
if [[ -d $OUT_DIR/tmp ]]; then
  while read -r big; do
    [[ -n $big ]] || continue
    say "device_check: deleting $big ($(stat -c %s "$big") bytes, left by a check)"
    rm -f "$big"
  done < <(find "$OUT_DIR/tmp" -type f -size +64M 2>/dev/null)
fi

say ""
say "== Summary ($(($(date +%s) - script_start)) s of the ${BUDGET_S} s budget; logs in $OUT_DIR)"
printf '%-36s %-8s %6s  %s\n' CHECK RESULT SECONDS NOTE
passed=0 failed=0 skipped=0 unrun=0
for i in "${!names[@]}"; do
  printf '%-36s %-8s %6s  %s\n' "${names[$i]}" "${results[$i]}" "${seconds[$i]}" "${notes[$i]}"
  case "${results[$i]}" in
    PASS) passed=$((passed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    "NOT RUN") failed=$((failed + 1)) unrun=$((unrun + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
done
summary="$passed passed, $failed failed"
((unrun == 0)) || summary="$summary ($unrun of them not run)"
((skipped == 0)) || summary="$summary, $skipped skipped"
say "$summary"
((failed == 0))
