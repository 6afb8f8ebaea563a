#!/usr/bin/env bash
# device_check.sh on a fake pack (no GPU needed): a probe, two tests of which one is
# tagged for memcheck, and a benchmark, with a fake compute-sanitizer. Checks the run
# order (tests, then memcheck runs, then benchmarks), the memcheck command (the
# sanitizer, then the binary with *LongContext* filtered out), a benchmark's "goals:"
# line in the summary, SKIP when the sanitizer reports "Device not supported", NOT RUN
# (printed, counted as failed) when the budget is spent or there is no GPU, and the
# summary line and exit status of each: the summary is in the output by the time the
# script exits (it waits for its tee; a fake tee here writes nothing otherwise).
set -euo pipefail

SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/device_check.sh"
[[ -f $SCRIPT ]] || SCRIPT="$TEST_SRCDIR/$TEST_WORKSPACE/tools/gpu/device_check.sh"
WORK="${TEST_TMPDIR:-$(mktemp -d)}/device_check"
rm -rf "$WORK"
mkdir -p "$WORK/pack/bin" "$WORK/pack/lib" "$WORK/fakebin" "$WORK/cuda/lib64"
# The libraries the script looks for, found at once under CUDA_HOME.
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  : >"$WORK/cuda/lib64/$lib"
done
printf '#!/bin/sh\nif [ "${FAKE_NO_GPU:-0}" = 1 ]; then echo "no usable GPU"; exit 1; fi\necho probe ok\n' \
  >"$WORK/pack/bin/gpu_probe"
printf '#!/bin/sh\necho "args: $*"\necho "[  PASSED  ] 1 test."\n' >"$WORK/pack/bin/kernel_test"
printf '#!/bin/sh\necho "[  PASSED  ] 1 test."\n' >"$WORK/pack/bin/plain_test"
printf '#!/bin/sh\necho "figures"\necho "goals: 3 met, 1 missed (GEMM x)"\n' >"$WORK/pack/bin/a_bench"
# The sanitizer prints its arguments, then runs the binary (after its 4 options), or
# says the device is not supported when FAKE_SANITIZER_UNSUPPORTED=1.
cat >"$WORK/fakebin/compute-sanitizer" <<'SAN'
#!/bin/sh
echo "sanitizer: $*"
if [ "${FAKE_SANITIZER_UNSUPPORTED:-0}" = 1 ]; then
  echo "========= Error: Device not supported"
  exit 1
fi
shift 4
exec "$@"
SAN
# A tee that keeps its copy until the end of its input and writes it only while the
# script (its parent) waits for it: a tee that the script does not wait for writes
# nothing, as if a loaded machine had run it only after the caller read the log. (At
# most ~10 s of polling the parent's state; past that it writes anyway.)
cat >"$WORK/fakebin/tee" <<'TEE'
#!/bin/bash
file="${!#}"
held="$(mktemp)"
cat >"$held"
for ((i = 0; i < 1000; i++)); do
  [[ $(tr '\0' ' ' 2>/dev/null </proc/$PPID/cmdline) == *device_check.sh* ]] || exit 0
  [[ $(awk '{ print $3 }' /proc/$PPID/stat 2>/dev/null) == S ]] && break
  sleep 0.01
done
cat "$held" >>"$file"
cat "$held"
rm -f "$held"
TEE
chmod +x "$WORK"/pack/bin/* "$WORK/fakebin/compute-sanitizer" "$WORK/fakebin/tee"
# Run order as pack.sh writes it: the probe, the tests by order, the benchmark last.
{
  printf 'check\tgpu_probe\t30\t//runtime/cuda:gpu_probe\t1\t0\ttest\n'
  printf 'check\tkernel_test\t20\t//a:kernel_test\t1\t1\ttest\n'
  printf 'check\tplain_test\t20\t//a:plain_test\t1\t0\ttest\n'
  printf 'check\ta_bench\t20\t//a:a_bench\t1\t0\tbench\n'
} >"$WORK/pack/manifest.tsv"

run() {
  local name="$1"
  shift
  env "$@" CUDA_HOME="$WORK/cuda" PATH="$WORK/fakebin:$PATH" LOCKSTEP_GPU_PACK="$WORK/pack" \
    bash "$SCRIPT" "$WORK/out-$name" >"$WORK/$name.log" 2>&1
}
fail() { echo "FAIL: $*"; cat "$WORK/$2.log"; exit 1; }
# The last line of run $1's output must be $2, and the script's own copy
# (device_check.log) the same as its output. Checked first after each run, so that a
# missing summary is what a failure names; read once, so the failure shows what was
# compared.
expect_summary() {
  local last
  last="$(tail -n 1 "$WORK/$1.log")"
  [[ $last == "$2" ]] || fail "summary: '$last', want '$2'" "$1"
  cmp -s "$WORK/$1.log" "$WORK/out-$1/device_check.log" || fail "device_check.log differs" "$1"
}

run supported || fail "device_check exited $?" supported
log="$WORK/supported.log"
expect_summary supported "5 passed, 0 failed"
order="$(grep -o '^== [a-z_.]* ' "$log" | sed 's/^== //' | tr -d ' ' | paste -sd ' ')"
[[ $order == "gpu_probe kernel_test plain_test kernel_test.memcheck a_bench" ]] ||
  fail "run order: $order" supported
grep -q '^kernel_test.memcheck  *PASS' "$log" || fail "no passing memcheck run" supported
grep -q 'sanitizer: --tool memcheck --error-exitcode 1 .*/kernel_test --gtest_color=no --gtest_filter=-\*LongContext\*' \
  "$log" || fail "the sanitizer did not get the binary and filter" supported
grep -q 'plain_test.memcheck' "$log" && fail "an untagged check ran under memcheck" supported
grep -q '^a_bench  *PASS .*goals: 3 met, 1 missed' "$log" || fail "no goals in the bench's note" supported

run unsupported FAKE_SANITIZER_UNSUPPORTED=1 || fail "a SKIP failed the run" unsupported
log="$WORK/unsupported.log"
expect_summary unsupported "4 passed, 0 failed, 1 skipped"
grep -q '^kernel_test.memcheck  *SKIP .*Device not supported' "$log" ||
  fail "no SKIP for an unsupported device" unsupported

# A budget too small for anything after the probe: every check is NOT RUN, said when
# reached and counted as failed.
if run spent DEVICE_CHECK_BUDGET_S=4; then fail "a spent budget passed" spent; fi
log="$WORK/spent.log"
expect_summary spent "1 passed, 4 failed (4 of them not run)"
for name in kernel_test plain_test kernel_test.memcheck a_bench; do
  grep -q "^== $name: NOT RUN (the 4 s budget is spent)" "$log" || fail "$name not NOT RUN" spent
done
grep -q '^args:' "$log" && fail "a check ran past the budget" spent

# No GPU: the probe fails and nothing else runs.
if run nogpu FAKE_NO_GPU=1; then fail "a run without a GPU passed" nogpu; fi
log="$WORK/nogpu.log"
expect_summary nogpu "0 passed, 5 failed (4 of them not run)"
grep -q "^== plain_test: NOT RUN (no usable GPU)" "$log" || fail "no NOT RUN without a GPU" nogpu
echo PASS
