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
#    wheels, then a bounded search of /) and puts their directories after the packed
#    libraries in LD_LIBRARY_PATH.
# 2. Prints the driver, CUDA runtime, cuBLAS and NCCL versions and each GPU's name and
#    memory (gpu_probe; nvidia-smi too when present). Without a usable GPU it stops
#    there with exit status 1 (DEVICE_CHECK_WITHOUT_GPU=1 runs the checks anyway).
# 3. Runs every packed check, in manifest order, under its own timeout and with
#    LOCKSTEP_REQUIRE_GPU=1 (a GPU test fails instead of skipping), each logged to
#    OUT_DIR/<check>.log, within a total budget (DEVICE_CHECK_BUDGET_S, default 450 s;
#    checks past it are not run and count as failed).
# 4. Runs the checks tagged "gpu_memcheck" again under compute-sanitizer --tool memcheck
#    (from PATH, CUDA_HOME or /usr/local/cuda*), without their *LongContext* cases; SKIP
#    where the machine has no compute-sanitizer or it reports "Device not supported".
# 5. Ends with a table and the line "N passed, M failed"; exit status 0 when none failed
#    (SKIP is neither).
#
# Everything printed also goes to OUT_DIR/device_check.log (default OUT_DIR:
# ./gpu-run-<UTC time>).
set -uo pipefail

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

# The directory holding library $1, or nothing. Looks in the usual places first.
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
    hit="$(timeout 30 "$py" - "$lib" 2>/dev/null <<'PY'
import glob, os, site, sys
roots = set(site.getsitepackages() + [site.getusersitepackages()] + sys.path)
for root in sorted(r for r in roots if r and os.path.isdir(r)):
    for path in glob.glob(os.path.join(root, "nvidia", "**", sys.argv[1]), recursive=True):
        print(os.path.dirname(path)); sys.exit(0)
PY
)"
    [[ -n $hit ]] && { say "$hit"; return; }
  done
  hit="$(timeout 60 find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path "$PACK" \) \
    -prune -o -name "$lib" -print -quit 2>/dev/null)"
  [[ -n $hit ]] && dirname "$hit"
}

say "== Lockstep GPU acceptance run, $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname)"
say "pack: $PACK"
grep '^# built\|^# flags' "$PACK/manifest.tsv" | sed 's/^# /pack /'
say "out: $OUT_DIR"

lib_path="$PACK/lib"
missing=()
for lib in "${REQUIRED_LIBS[@]}"; do
  dir="$(find_lib_dir "$lib")"
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

# Runs one check with its timeout; records PASS, FAIL (exit status) or TIMEOUT. The
# command is the packed binary, or the words after the first two arguments.
run_check() {
  local name="$1" limit="$2" log="$OUT_DIR/$1.log" start end rc note
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

run_start=$(date +%s)
# The manifest's checks, probe first: "check<TAB>name<TAB>timeout<TAB>target<TAB>bytes".
mapfile -t checks < <(awk -F'\t' '$1 == "check" { print $2 "\t" $3 }' "$PACK/manifest.tsv")
probe_ok=1
for entry in "${checks[@]}"; do
  name="${entry%%$'\t'*}"
  limit="${entry##*$'\t'}"
  if [[ $name == gpu_probe ]]; then
    if ! run_check "$name" "$limit"; then
      probe_ok=0
      say ""
      say "device_check: no usable GPU here (gpu_probe above says why${missing[*]:+; libraries not found: ${missing[*]}})."
      if [[ ${DEVICE_CHECK_WITHOUT_GPU:-0} != 1 ]]; then
        say "device_check: the checks need a GPU; not running them (DEVICE_CHECK_WITHOUT_GPU=1 runs them anyway)."
        continue
      fi
    fi
    continue
  fi
  if ((probe_ok == 0)) && [[ ${DEVICE_CHECK_WITHOUT_GPU:-0} != 1 ]]; then
    record "$name" "NOT RUN" 0 "no usable GPU"
    continue
  fi
  left=$((BUDGET_S - ($(date +%s) - run_start)))
  if ((left < 5)); then
    record "$name" "NOT RUN" 0 "the ${BUDGET_S} s budget is spent"
    continue
  fi
  ((limit > left)) && limit=$left
  run_check "$name" "$limit"
done

# compute-sanitizer memcheck over the checks tagged gpu_memcheck (manifest column 6).
sanitizer="$(command -v compute-sanitizer 2>/dev/null)"
for candidate in ${CUDA_HOME:+"$CUDA_HOME/bin/compute-sanitizer"} /usr/local/cuda/bin/compute-sanitizer \
  /usr/local/cuda-13*/bin/compute-sanitizer; do
  [[ -z $sanitizer && -x $candidate ]] && sanitizer="$candidate"
done
mapfile -t memchecks < <(awk -F'\t' '$1 == "check" && $6 == 1 { print $2 "\t" $3 }' "$PACK/manifest.tsv")
for entry in "${memchecks[@]}"; do
  name="${entry%%$'\t'*}.memcheck"
  limit=$((3 * ${entry##*$'\t'}))
  if ((probe_ok == 0)) && [[ ${DEVICE_CHECK_WITHOUT_GPU:-0} != 1 ]]; then
    record "$name" "NOT RUN" 0 "no usable GPU"
    continue
  fi
  if [[ -z $sanitizer ]]; then
    record "$name" SKIP 0 "no compute-sanitizer on this machine"
    continue
  fi
  left=$((BUDGET_S - ($(date +%s) - run_start)))
  if ((left < 5)); then
    record "$name" "NOT RUN" 0 "the ${BUDGET_S} s budget is spent"
    continue
  fi
  ((limit > left)) && limit=$left
  run_check "$name" "$limit" "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$PACK/bin/${entry%%$'\t'*}" --gtest_color=no '--gtest_filter=-*LongContext*'
  if grep -q 'Device not supported' "$OUT_DIR/$name.log"; then
    results[${#results[@]} - 1]=SKIP
    notes[${#notes[@]} - 1]="compute-sanitizer: Device not supported"
  fi
done

say ""
say "== Summary ($(($(date +%s) - run_start)) s; logs in $OUT_DIR)"
printf '%-36s %-8s %6s  %s\n' CHECK RESULT SECONDS NOTE
passed=0 failed=0 skipped=0
for i in "${!names[@]}"; do
  printf '%-36s %-8s %6s  %s\n' "${names[$i]}" "${results[$i]}" "${seconds[$i]}" "${notes[$i]}"
  case "${results[$i]}" in
    PASS) passed=$((passed + 1)) ;;
    SKIP) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
done
say "$passed passed, $failed failed$( ((skipped == 0)) || printf ', %s skipped' "$skipped")"
((failed == 0))
