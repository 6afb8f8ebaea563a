#!/usr/bin/env bash
# The GPU acceptance run, on a machine with a GPU, its driver and the CUDA 13 libraries
# (CUDA runtime, cuBLAS, NCCL) but no Bazel: runs the checks that tools/gpu/pack.sh
# packed into .gpu/ (docs/gpu.md, "Running", gives the exact device call).
#
#   tools/gpu/device_check.sh [RUN_DIR [RESULTS_DIR]]   (repository root, .gpu/ present)
#   .gpu/device_check.sh [RUN_DIR [RESULTS_DIR]]        (the copy inside the pack)
#
# 1. Stops at once, saying how the pack travels, when .gpu/ is missing; refuses to run
#    anything when the machine's glibc is older than the pack needs (its manifest's
#    "# needs glibc"); unpacks .gpu/pack.tar.xz (xz, else python3's lzma).
# 2. Finds the machine's CUDA runtime, cuBLAS/cuBLASLt and NCCL libraries (CUDA_HOME,
#    /usr/local/cuda*, the loader cache, Python nvidia-* wheels, then one bounded search
#    of /) and puts them after the packed libraries in LD_LIBRARY_PATH.
# 3. Runs, in the manifest's order (by value: probe, kernels, the kernel benchmark, KV
#    memory and NCCL, the engine, its benchmarks, serving), each check under its limit
#    with LOCKSTEP_REQUIRE_GPU=1 and LOCKSTEP_CHECK_TIMEOUT_S=<its limit>, logged to
#    RUN_DIR/<check>.log (gtest flags only to gtest binaries); then memcheck runs under
#    compute-sanitizer (limit twice the test's, without *LongContext*; SKIP without a
#    sanitizer or on "Device not supported"). Without a usable GPU (gpu_probe fails)
#    nothing after the probe runs (DEVICE_CHECK_WITHOUT_GPU=1 runs it anyway).
# 4. Keeps within DEVICE_CHECK_BUDGET_S (default 450 s from the script's start, 10 s of
#    it kept for the results): a check runs only when its manifest estimate fits what
#    is left, under a limit cut to what is left; otherwise it is NOT RUN with the reason.
#    DEVICE_CHECK_ONLY=<regex> runs only the checks whose names match (the probe always
#    runs; a memcheck run is "<check>.memcheck"), DEVICE_CHECK_MEMCHECK=0 runs no
#    memcheck, DEVICE_CHECK_MEMCHECK=<name,name> those tests' (default: the tests
#    tagged gpu_memcheck): a second call on a warm machine finishes what the first did
#    not.
# 5. Ends with a table and "N passed, M failed" (", K not run", ", S skipped", ", D not
#    selected"); exit status 0 only when nothing failed or was not run. Writes
#    RUN_DIR/summary.txt (the table, every goal line, the first lines of each failure,
#    ldd --version, driver/CUDA/NCCL versions, an nvidia-smi -q excerpt, the benchmarks'
#    figures) and, with RESULTS_DIR, copies it there beside RUN_DIR as one archive,
#    gpu-run.tar.gz (files over 64 MiB that checks left are deleted first, models
#    (*.safetensors) left out, logs over 8 MiB cut to their first and last MiB).
#
# What is printed is kept short (each check's output goes to its log only), so the
# summary table ends a device call's last 12,000 characters. Everything printed also
# goes to RUN_DIR/device_check.log (default RUN_DIR: ./gpu-run-<UTC time>); the script
# exits only once both have all of it.
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
RESULTS_DIR="${2:-}"
BUDGET_S="${DEVICE_CHECK_BUDGET_S:-450}"
RESERVE_S=10
ONLY="${DEVICE_CHECK_ONLY:-}"
MEMCHECK="${DEVICE_CHECK_MEMCHECK:-}"
REQUIRED_LIBS=(libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2)

say() { printf '%s\n' "$*"; }

if [[ ! -f $PACK/manifest.tsv ]]; then
  # The sentence docs/gpu.md ("Running") gives; also in RESULTS_DIR so that it comes back.
  missing_pack="device_check: no pack at $PACK: .gpu/ is git-ignored and reaches the GPU machine only when the device call names it: run tools/gpu/pack.sh on the build machine, then call the device tool with command 'tools/gpu/device_check.sh /tmp/gpu-run \"\$OUT\"', carry [\".gpu\"] and timeout_s 540 (docs/gpu.md, \"Running\")."
  say "$missing_pack" >&2
  [[ -n $RESULTS_DIR ]] && mkdir -p "$RESULTS_DIR" && say "$missing_pack" >"$RESULTS_DIR/summary.txt"
  exit 2
fi
mkdir -p "$OUT_DIR" || { say "device_check: cannot create $OUT_DIR" >&2; exit 2; }
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
if [[ -n $RESULTS_DIR ]]; then
  mkdir -p "$RESULTS_DIR" || { say "device_check: cannot create $RESULTS_DIR" >&2; exit 2; }
  RESULTS_DIR="$(cd "$RESULTS_DIR" && pwd)"
fi
# shellcheck source=tools/gpu/device_check_lib.sh
source "$SCRIPT_DIR/device_check_lib.sh" || { say "device_check: no $SCRIPT_DIR/device_check_lib.sh" >&2; exit 2; }
exec > >(tee -a "$OUT_DIR/device_check.log") 2>&1
# On exit, close the pipe to tee and wait for it: otherwise the script can end before
# tee has written its last lines (the summary), and whoever reads them next misses them.
# Then (silently: nothing may follow the summary) pack the results.
tee_pid=$!
finish() {
  local rc=$?
  exec >&- 2>&-
  wait "$tee_pid"
  archive_results
  exit "$rc"
}
trap finish EXIT

say "== Lockstep GPU acceptance run, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname)"
say "pack: $PACK"
grep '^# built\|^# flags\|^# needs' "$PACK/manifest.tsv" | sed 's/^# /pack /'
say "run: $OUT_DIR${RESULTS_DIR:+ (results: $RESULTS_DIR/summary.txt and gpu-run.tar.gz)}"
say "budget: ${BUDGET_S} s for the whole run, ${RESERVE_S} s of it kept for the results"
run_note=""

# Results, in run order: name, kind (test, bench, memcheck), result, seconds, note.
names=() kinds=() results=() seconds=() notes=()
record() { names+=("$1"); kinds+=("$2"); results+=("$3"); seconds+=("$4"); notes+=("$5"); }
not_run() {
  say "== $1: NOT RUN ($3)"
  record "$1" "$2" "NOT RUN" 0 "$3"
}

# The plan, in run order: "name<TAB>kind<TAB>limit<TAB>estimate<TAB>gtest" from the
# manifest's "check<TAB>name<TAB>timeout<TAB>target<TAB>bytes<TAB>memcheck<TAB>stage
# <TAB>estimate<TAB>gtest" lines (older packs: no estimate (a third of the limit), gtest
# for every test), then one memcheck run per selected test.
mapfile -t checks < <(awk -F'\t' '$1 == "check" {
    stage = ($7 == "" ? "test" : $7)
    print $2 "\t" stage "\t" $3 "\t" ($8 == "" ? int(($3 + 2) / 3) : $8) "\t" ($9 == "" ? (stage == "test") : $9) "\t" ($6 == "" ? 0 : $6)
  }' "$PACK/manifest.tsv")
plan=()
declare -A is_test=()
for entry in "${checks[@]}"; do
  IFS=$'\t' read -r name kind limit estimate gtest memcheck <<<"$entry"
  plan+=("$name"$'\t'"$kind"$'\t'"$limit"$'\t'"$estimate"$'\t'"$gtest")
  [[ $kind == test && $name != gpu_probe ]] && is_test[$name]=$gtest
done
# The memcheck runs: the tests tagged gpu_memcheck, or those DEVICE_CHECK_MEMCHECK
# names (the others listed as not selected, as all of them with DEVICE_CHECK_MEMCHECK=0).
blocked=""
chosen=()
[[ -n $MEMCHECK && $MEMCHECK != 0 ]] && IFS=',' read -r -a chosen <<<"$MEMCHECK"
for name in "${chosen[@]}"; do
  if [[ ${is_test[$name]:-0} != 1 ]]; then
    blocked="DEVICE_CHECK_MEMCHECK names $name, which is no packed gtest check"
    say "device_check: $blocked"
  fi
done
declare -A memcheck_off=()
for entry in "${checks[@]}"; do
  IFS=$'\t' read -r name kind limit estimate gtest memcheck <<<"$entry"
  [[ ${is_test[$name]:-0} == 1 ]] || continue
  if [[ " ${chosen[*]} " == *" $name "* ]]; then
    :
  elif [[ $memcheck == 1 ]]; then
    [[ -n $MEMCHECK ]] && memcheck_off[$name.memcheck]="not selected (DEVICE_CHECK_MEMCHECK=$MEMCHECK)"
  else
    continue
  fi
  # Twice the test's limit; expected to take 5 times the test's estimate.
  estimate=$((5 * estimate < 2 * limit ? 5 * estimate : 2 * limit))
  plan+=("$name.memcheck"$'\t'memcheck$'\t'"$((2 * limit))"$'\t'"$estimate"$'\t'1)
done
[[ -n $ONLY ]] && say "DEVICE_CHECK_ONLY=$ONLY: only the checks it matches (and the probe) run"
[[ $MEMCHECK == 0 ]] && say "DEVICE_CHECK_MEMCHECK=0: no memcheck runs"

# 1. Can the packed binaries load here at all? Then unpack them.
need_glibc="$(awk '$1 == "#" && $2 == "needs" && $3 == "glibc" { print $4 }' "$PACK/manifest.tsv")"
need_glibc="${need_glibc:-2.36}"
have_glibc="$(ldd --version 2>&1 | head -n 1 | grep -oE '[0-9]+\.[0-9]+' | tail -n 1)"
if [[ -z $blocked ]] && { [[ -z $have_glibc ]] || version_older "$have_glibc" "$need_glibc"; }; then
  blocked="glibc ${have_glibc:-unknown} here; the packed binaries and libstdc++ need glibc >= $need_glibc"
  say "device_check: this machine's C library is glibc ${have_glibc:-unknown} ($(ldd --version 2>&1 | head -n 1));" \
    "the packed binaries need glibc >= $need_glibc (the build machine's libstdc++): nothing can load, nothing runs" \
    "(docs/gpu.md: build the .cu harness on this machine instead)"
else
  say "glibc: ${have_glibc} here, the pack needs >= $need_glibc"
fi
BIN="$PACK/bin" PACKED_LIB="$PACK/lib"
if [[ -z $blocked && -f $PACK/pack.tar.xz ]]; then
  unpacked="${DEVICE_CHECK_UNPACK_DIR:-${TMPDIR:-/tmp}/lockstep-gpu-pack}"
  unpack_start=$(date +%s)
  if how="$(unpack_pack "$unpacked")"; then
    BIN="$unpacked/bin" PACKED_LIB="$unpacked/lib"
    run_note="unpacked pack.tar.xz into $unpacked with $how in $(($(date +%s) - unpack_start)) s"
    say "$run_note"
  else
    blocked="pack.tar.xz could not be unpacked (no xz, and python3 could not read it)"
    say "device_check: $blocked"
  fi
elif [[ -z $blocked && ! -d $PACK/bin ]]; then
  blocked="the pack has neither pack.tar.xz nor bin/ (an incomplete copy of .gpu/?)"
  say "device_check: $blocked"
fi

# 2. The machine's CUDA libraries after the packed ones.
lib_path="$PACKED_LIB"
missing=()
declare -A lib_dirs=()
for lib in "${REQUIRED_LIBS[@]}"; do
  dir="$(find_lib_dir "$lib")"
  if [[ -n $dir ]]; then lib_dirs[$lib]="$dir"; else missing+=("$lib"); fi
done
if ((${#missing[@]} > 0)); then
  # One bounded search of / for every library still missing.
  patterns=()
  for lib in "${missing[@]}"; do patterns+=(-o -name "$lib"); done
  while read -r hit; do
    [[ -n $hit && -z ${lib_dirs[$(basename "$hit")]:-} ]] && lib_dirs[$(basename "$hit")]="$(dirname "$hit")"
  done < <(timeout 60 find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path "$PACK" \) \
    -prune -o \( -false "${patterns[@]}" \) -print 2>/dev/null)
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
driver="$(/sbin/ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" { print $NF; exit }')"
say "driver library libcuda.so.1: ${driver:-NOT FOUND in the loader cache}"
if command -v nvidia-smi >/dev/null; then
  timeout 30 nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version \
    --format=csv,noheader 2>&1 | head -n 8 | sed 's/^/nvidia-smi: /'
else
  say "nvidia-smi: not installed"
fi
sanitizer="$(command -v compute-sanitizer 2>/dev/null)"
for candidate in ${CUDA_HOME:+"$CUDA_HOME/bin/compute-sanitizer"} /usr/local/cuda/bin/compute-sanitizer \
  /usr/local/cuda-13*/bin/compute-sanitizer; do
  [[ -z $sanitizer && -x $candidate ]] && sanitizer="$candidate"
done

# 3. The plan with its predicted times (the manifest's estimates).
say ""
say "plan: expected seconds each and by the end of each, in run order ($((BUDGET_S - RESERVE_S)) s to spend):"
by=$(($(date +%s) - script_start))
for entry in "${plan[@]}"; do
  IFS=$'\t' read -r name kind limit estimate gtest <<<"$entry"
  if [[ -n ${memcheck_off[$name]:-} ]] || { [[ -n $ONLY && $name != gpu_probe ]] && ! [[ $name =~ $ONLY ]]; }; then
    continue
  fi
  by=$((by + estimate))
  printf '  %-40s %4s s  by %4s s%s\n' "$name" "$estimate" "$by" \
    "$( ((by > BUDGET_S - RESERVE_S)) && echo '  (past the budget)')"
done

# Runs check $1 (kind $2, limit $3 s, gtest $4; a memcheck run when $2 is memcheck):
# records PASS, FAIL (exit status) or TIMEOUT and prints one line, with the failure's
# first lines when it did not pass.
run_check() {
  local name="$1" kind="$2" limit="$3" gtest="$4" log="$OUT_DIR/$1.log" start end rc note goals
  local cmd=("$BIN/$name")
  if [[ $kind == memcheck ]]; then
    cmd=("$sanitizer" --tool memcheck --error-exitcode 1 "$BIN/${name%.memcheck}" --gtest_color=no
      '--gtest_filter=-*LongContext*')
  elif [[ $gtest == 1 ]]; then
    cmd+=(--gtest_color=no)
  fi
  say "== $name (limit ${limit} s)"
  start=$(date +%s)
  (
    cd "$OUT_DIR" && mkdir -p "tmp/$name" &&
      TEST_TMPDIR="$OUT_DIR/tmp/$name" LOCKSTEP_REQUIRE_GPU=1 LOCKSTEP_CHECK_TIMEOUT_S="$limit" \
        timeout --kill-after=10 "$limit" "${cmd[@]}"
  ) >"$log" 2>&1
  rc=$?
  end=$(date +%s)
  note="$(grep -E '^\[  (PASSED|FAILED) +\]' "$log" | head -2 | tr -s ' ' | paste -sd ';' -)"
  goals="$(grep -m1 '^goals: ' "$log")"
  [[ -n $goals ]] && note="${note:+$note; }$goals"
  if grep -q 'error while loading shared libraries' "$log"; then
    note="$(grep -m1 'error while loading shared libraries' "$log" | sed 's/.*: //')"
  fi
  if ((rc == 124 || rc == 137)); then
    record "$name" "$kind" TIMEOUT $((end - start)) "killed after ${limit} s"
  elif ((rc == 0)); then
    record "$name" "$kind" PASS $((end - start)) "$note"
  elif [[ $kind == memcheck ]] && grep -q 'Device not supported' "$log"; then
    record "$name" "$kind" SKIP $((end - start)) "compute-sanitizer: Device not supported"
  else
    record "$name" "$kind" FAIL $((end - start)) "exit $rc${note:+; $note}"
  fi
  say "-- $name: ${results[${#results[@]} - 1]} in $((end - start)) s"
  [[ ${results[${#results[@]} - 1]} == PASS || ${results[${#results[@]} - 1]} == SKIP ]] ||
    failure_excerpt "$log" 4 | cut -c 1-160 | sed 's/^/   | /'
  return "$rc"
}

# 4. Run the plan.
probe_ok=1
for entry in "${plan[@]}"; do
  IFS=$'\t' read -r name kind limit estimate gtest <<<"$entry"
  if [[ -n $ONLY && $name != gpu_probe ]] && ! [[ $name =~ $ONLY ]]; then
    record "$name" "$kind" "NOT RUN" 0 "not selected (DEVICE_CHECK_ONLY=$ONLY)"
    continue
  fi
  if [[ -n ${memcheck_off[$name]:-} ]]; then
    record "$name" "$kind" "NOT RUN" 0 "${memcheck_off[$name]}"
    continue
  fi
  if [[ -n $blocked ]]; then
    not_run "$name" "$kind" "$blocked"
    continue
  fi
  if [[ $name != gpu_probe ]] && ((probe_ok == 0)) && [[ ${DEVICE_CHECK_WITHOUT_GPU:-0} != 1 ]]; then
    not_run "$name" "$kind" "no usable GPU"
    continue
  fi
  if [[ $kind == memcheck && -z $sanitizer ]]; then
    record "$name" "$kind" SKIP 0 "no compute-sanitizer on this machine"
    continue
  fi
  remaining=$((BUDGET_S - RESERVE_S - ($(date +%s) - script_start)))
  if ((remaining < estimate || remaining < 1)); then
    not_run "$name" "$kind" "needs ~${estimate} s, $((remaining < 0 ? 0 : remaining)) s of the ${BUDGET_S} s budget left"
    continue
  fi
  ((limit > remaining)) && limit=$remaining
  if ! run_check "$name" "$kind" "$limit" "$gtest" && [[ $name == gpu_probe ]]; then
    probe_ok=0
    say "device_check: no usable GPU here (gpu_probe.log says why${missing[*]:+; libraries not found: ${missing[*]}})."
    [[ ${DEVICE_CHECK_WITHOUT_GPU:-0} == 1 ]] ||
      say "device_check: the checks need a GPU; not running them (DEVICE_CHECK_WITHOUT_GPU=1 runs them anyway)."
  fi
done

# Large files the checks left behind (models) would only weigh down the results.
if [[ -d $OUT_DIR/tmp ]]; then
  while read -r big; do
    [[ -n $big ]] || continue
    say "device_check: deleting $big ($(stat -c %s "$big") bytes, left by a check)"
    rm -f "$big"
  done < <(find "$OUT_DIR/tmp" -type f -size +64M 2>/dev/null)
fi

passed=0 failed=0 skipped=0 unrun=0 unselected=0
for i in "${!names[@]}"; do
  case "${results[$i]}" in
    PASS) passed=$((passed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    "NOT RUN")
      if [[ ${notes[$i]} == "not selected"* ]]; then
        unselected=$((unselected + 1))
      else
        failed=$((failed + 1)) unrun=$((unrun + 1))
      fi
      ;;
    *) failed=$((failed + 1)) ;;
  esac
done
counts="$passed passed, $failed failed"
((unrun == 0)) || counts="$counts ($unrun of them not run)"
((skipped == 0)) || counts="$counts, $skipped skipped"
((unselected == 0)) || counts="$counts, $unselected not selected"
write_summary "$counts"

say ""
say "== Summary ($(($(date +%s) - script_start)) s of the ${BUDGET_S} s budget; all in $OUT_DIR/summary.txt${RESULTS_DIR:+ and $RESULTS_DIR})"
print_table 1
for i in "${!names[@]}"; do
  [[ ${kinds[$i]} == bench && -f $OUT_DIR/${names[$i]}.log ]] || continue
  grep -E '^goals: |[[:space:]](PASS|MISS)([[:space:]]|$)' "$OUT_DIR/${names[$i]}.log" |
    cut -c 1-160 | sed "s/^/${names[$i]}: /"
done
say "$counts"
((failed == 0))
