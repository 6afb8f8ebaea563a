#!/usr/bin/env bash
# device_check.sh on a fake pack (no GPU needed): a passing probe, two checks of which
# one is tagged for memcheck, and a fake compute-sanitizer. Checks the memcheck run
# (the sanitizer, then the binary with *LongContext* filtered out), its PASS, a SKIP when
# the sanitizer reports "Device not supported", and the summary line.
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
printf '#!/bin/sh\necho probe ok\n' >"$WORK/pack/bin/gpu_probe"
printf '#!/bin/sh\necho "args: $*"\necho "[  PASSED  ] 1 test."\n' >"$WORK/pack/bin/kernel_test"
printf '#!/bin/sh\necho "[  PASSED  ] 1 test."\n' >"$WORK/pack/bin/plain_test"
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
chmod +x "$WORK"/pack/bin/* "$WORK/fakebin/compute-sanitizer"
printf 'check\tgpu_probe\t60\t//runtime/cuda:gpu_probe\t1\t0\n' >"$WORK/pack/manifest.tsv"
printf 'check\tkernel_test\t20\t//a:kernel_test\t1\t1\n' >>"$WORK/pack/manifest.tsv"
printf 'check\tplain_test\t20\t//a:plain_test\t1\t0\n' >>"$WORK/pack/manifest.tsv"

run() {
  CUDA_HOME="$WORK/cuda" PATH="$WORK/fakebin:$PATH" LOCKSTEP_GPU_PACK="$WORK/pack" \
    bash "$SCRIPT" "$WORK/out-$1" >"$WORK/$1.log" 2>&1
}
fail() { echo "FAIL: $*"; cat "$WORK/$2.log"; exit 1; }

run supported || fail "device_check exited $?" supported
log="$WORK/supported.log"
grep -q '^kernel_test.memcheck  *PASS' "$log" || fail "no passing memcheck run" supported
grep -q 'sanitizer: --tool memcheck --error-exitcode 1 .*/kernel_test --gtest_color=no --gtest_filter=-\*LongContext\*' \
  "$log" || fail "the sanitizer did not get the binary and filter" supported
grep -q 'plain_test.memcheck' "$log" && fail "an untagged check ran under memcheck" supported
[[ $(tail -n 1 "$log") == "4 passed, 0 failed" ]] || fail "summary: $(tail -n 1 "$log")" supported

FAKE_SANITIZER_UNSUPPORTED=1 run unsupported || fail "a SKIP failed the run" unsupported
log="$WORK/unsupported.log"
grep -q '^kernel_test.memcheck  *SKIP .*Device not supported' "$log" ||
  fail "no SKIP for an unsupported device" unsupported
[[ $(tail -n 1 "$log") == "3 passed, 0 failed, 1 skipped" ]] ||
  fail "summary: $(tail -n 1 "$log")" unsupported
echo PASS
