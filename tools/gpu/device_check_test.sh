#!/usr/bin/env bash
# pack_archive.sh and device_check.sh on a fake pack (no GPU needed): a probe, two tests
# of which one is tagged for memcheck, and a benchmark, with a fake compute-sanitizer,
# ldd and nvidia-smi. Checks that the pack is compressed and its size printed (and
# refused with the sizes when the call would not fit); that a missing pack stops at
# once with the sentence saying how it travels; that a glibc older than the pack needs
# runs nothing; unpacking with xz and, without it, python3; the run order (probe,
# tests and benchmarks by the manifest, memcheck runs last); gtest flags only to gtest
# binaries; the memcheck command; DEVICE_CHECK_ONLY and DEVICE_CHECK_MEMCHECK; NOT RUN
# with its reason for what does not fit (estimate), is not selected or has no GPU; SKIP
# when the sanitizer reports "Device not supported"; summary.txt and gpu-run.tar.gz in
# the results directory; the summary table within the output's last 12,000 characters
# when a check is chatty; and the summary line and exit status of each run: the
# summary is in the output by the time the script exits (it waits for its tee; a fake
# tee here writes nothing otherwise).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ -f $HERE/device_check.sh ]] || HERE="$TEST_SRCDIR/$TEST_WORKSPACE/tools/gpu"
SCRIPT="$HERE/device_check.sh"
WORK="${TEST_TMPDIR:-$(mktemp -d)}/device_check"
rm -rf "$WORK"
mkdir -p "$WORK/stage/bin" "$WORK/stage/lib" "$WORK/stage/data" "$WORK/fakebin" "$WORK/cuda/lib64"
# The libraries the script looks for, found at once under CUDA_HOME.
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  : >"$WORK/cuda/lib64/$lib"
done
printf '#!/bin/sh\nif [ "${FAKE_NO_GPU:-0}" = 1 ]; then echo "no usable GPU"; exit 1; fi\necho "probe ok, args: $*"\necho "NCCL 2.28.9"\n' \
  >"$WORK/stage/bin/gpu_probe"
# kernel_test prints its arguments and limit and leaves a model in its TEST_TMPDIR.
cat >"$WORK/stage/bin/kernel_test" <<'TEST'
#!/bin/sh
echo "args: $*"
echo "limit: $LOCKSTEP_CHECK_TIMEOUT_S"
echo weights >"$TEST_TMPDIR/model.safetensors"
echo "[  PASSED  ] 1 test."
TEST
# With FAKE_FAIL=1: 200 KB of output, then a gtest failure.
cat >"$WORK/stage/bin/plain_test" <<'TEST'
#!/bin/bash
if [[ ${FAKE_FAIL:-0} == 1 ]]; then
  for ((i = 0; i < 2000; i++)); do printf 'chatter %04d %090d\n' "$i" 0; done
  echo "plain_test.cc:12: Failure"
  echo "Expected equality of these values: the first failure line"
  echo "[  FAILED  ] PlainTest.Fails (1 ms)"
  exit 1
fi
echo "[  PASSED  ] 1 test."
TEST
printf '#!/bin/sh\necho "bench args: [$*]"\necho "GEMM 1B m=1  0.95 PASS"\necho "GEMM 8B m=1  0.80 MISS"\necho "goals: 3 met, 1 missed (GEMM x)"\n' \
  >"$WORK/stage/bin/a_bench"
echo "data" >"$WORK/stage/data/example.yaml"
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
# This machine's C library as FAKE_GLIBC says (default: newer than the pack needs).
printf '#!/bin/sh\necho "ldd (Fake GLIBC ${FAKE_GLIBC:-2.39}) ${FAKE_GLIBC:-2.39}"\n' >"$WORK/fakebin/ldd"
printf '#!/bin/sh\nif [ "$1" = -q ]; then printf "Driver Version : 580.159\\nCUDA Version : 13.0\\nProduct Name : Fake H200\\nUnrelated : x\\n"; else echo "0, Fake H200, 143771 MiB"; fi\n' \
  >"$WORK/fakebin/nvidia-smi"
# A tee that keeps its copy until the end of its input and writes it only while the
# script (its parent) waits for it: sleeping with this tee as its only child (waiting
# for another child, such as the results' tar, is not waiting for the tee). A tee that
# the script does not wait for writes nothing, as if a loaded machine had run it only
# after the caller read the log. (At most ~10 s of polling the parent's state; past
# that it writes anyway.)
cat >"$WORK/fakebin/tee" <<'TEE'
#!/bin/bash
file="${!#}"
held="$(mktemp)"
cat >"$held"
for ((i = 0; i < 1000; i++)); do
  [[ $(tr '\0' ' ' 2>/dev/null </proc/$PPID/cmdline) == *device_check.sh* ]] || exit 0
  kids=("$$")
  [[ -r /proc/$PPID/task/$PPID/children ]] && read -r -a kids </proc/$PPID/task/$PPID/children
  [[ $(awk '{ print $3 }' /proc/$PPID/stat 2>/dev/null) == S && "${kids[*]}" == "$$" ]] && break
  sleep 0.01
done
cat "$held" >>"$file"
cat "$held"
rm -f "$held"
TEE
# An xz that fails, for the runs that must unpack with python3.
mkdir -p "$WORK/brokenxz"
printf '#!/bin/sh\necho "xz: broken" >&2\nexit 1\n' >"$WORK/brokenxz/xz"
chmod +x "$WORK"/stage/bin/* "$WORK"/fakebin/* "$WORK/brokenxz/xz"
# Run order as pack.sh writes it (by gpu_order): the probe, the tests, the benchmark,
# with estimates and gtest flags; device_check.sh puts the memcheck runs last.
{
  printf '# built 2026-12-05 from test\n'
  printf 'check\tgpu_probe\t30\t//runtime/cuda:gpu_probe\t1\t0\ttest\t1\t0\n'
  printf 'check\tkernel_test\t20\t//a:kernel_test\t1\t1\ttest\t1\t1\n'
  printf 'check\tplain_test\t20\t//a:plain_test\t1\t0\ttest\t1\t1\n'
  printf 'check\ta_bench\t20\t//a:a_bench\t1\t0\tbench\t1\t0\n'
} >"$WORK/stage/manifest.tsv"

fail() { echo "FAIL: $*"; [[ -f $WORK/$2.log ]] && cat "$WORK/$2.log"; exit 1; }

# The pack: compressed, its size and the call's total printed; refused when too big.
PACK_REPO_BYTES=1000 "$HERE/pack_archive.sh" "$WORK/stage" "$WORK/pack" >"$WORK/pack.log" 2>&1 ||
  fail "pack_archive.sh failed" pack
grep -q 'the device call carries the repository (1000 bytes) and the pack: [0-9]* of 67108864 bytes' \
  "$WORK/pack.log" || fail "no sizes printed" pack
[[ -f $WORK/pack/pack.tar.xz && ! -e $WORK/pack/bin ]] || fail "not one archive" pack
grep -q '^# needs glibc 2.36$' "$WORK/pack/manifest.tsv" || fail "no glibc floor in the manifest" pack
grep -q '^# archive pack.tar.xz [0-9]* bytes' "$WORK/pack/manifest.tsv" || fail "no archive line" pack
if PACK_REPO_BYTES=1000 PACK_CALL_LIMIT_BYTES=3000 PACK_MARGIN_BYTES=100 \
  "$HERE/pack_archive.sh" "$WORK/stage" "$WORK/toobig" >"$WORK/toobig.log" 2>&1; then
  fail "a pack over the limit passed" toobig
fi
grep -q 'does not fit: pack [0-9]* + repository 1000 = [0-9]* bytes, over the call.s 3000' \
  "$WORK/toobig.log" || fail "no sizes in the refusal" toobig

# run NAME [VAR=value...]: device_check.sh on the pack with results in out-NAME/results.
run() {
  local name="$1"
  shift
  mkdir -p "$WORK/tmp-$name"
  env "$@" CUDA_HOME="$WORK/cuda" PATH="${FAKE_PATH_HEAD:-}$WORK/fakebin:$PATH" \
    LOCKSTEP_GPU_PACK="${PACK_DIR:-$WORK/pack}" TMPDIR="$WORK/tmp-$name" \
    bash "$SCRIPT" "$WORK/out-$name/run" "$WORK/out-$name/results" >"$WORK/$name.log" 2>&1
}
# The last line of run $1's output must be $2, and the script's own copy
# (device_check.log) the same as its output. Checked first after each run, so that a
# missing summary is what a failure names; read once, so the failure shows what was
# compared.
expect_summary() {
  local last
  last="$(tail -n 1 "$WORK/$1.log")"
  [[ $last == "$2" ]] || fail "summary: '$last', want '$2'" "$1"
  cmp -s "$WORK/$1.log" "$WORK/out-$1/run/device_check.log" || fail "device_check.log differs" "$1"
}
# The run order: the checks that started, in order.
order() { grep -o '^== [a-z_.]* (limit' "$WORK/$1.log" | sed 's/^== //; s/ (limit//' | paste -sd ' '; }

run supported || fail "device_check exited $?" supported
log="$WORK/supported.log"
expect_summary supported "5 passed, 0 failed"
[[ $(order supported) == "gpu_probe kernel_test plain_test a_bench kernel_test.memcheck" ]] ||
  fail "run order: $(order supported)" supported
grep -q 'unpacked pack.tar.xz .* with xz' "$log" || fail "not unpacked with xz" supported
grep -q '^kernel_test.memcheck  *PASS' "$log" || fail "no passing memcheck run" supported
grep -q 'sanitizer: --tool memcheck --error-exitcode 1 .*/kernel_test --gtest_color=no --gtest_filter=-\*LongContext\*' \
  "$WORK/out-supported/run/kernel_test.memcheck.log" || fail "the sanitizer did not get the binary and filter" supported
grep -q 'plain_test.memcheck' "$log" && fail "an untagged check ran under memcheck" supported
grep -q '^args: --gtest_color=no$' "$WORK/out-supported/run/kernel_test.log" || fail "a gtest without its flag" supported
grep -q '^limit: 20$' "$WORK/out-supported/run/kernel_test.log" || fail "no LOCKSTEP_CHECK_TIMEOUT_S" supported
grep -q '^bench args: \[\]$' "$WORK/out-supported/run/a_bench.log" || fail "a benchmark got arguments" supported
grep -q '^probe ok, args: $' "$WORK/out-supported/run/gpu_probe.log" || fail "the probe got arguments" supported
grep -q '^a_bench  *PASS .*goals: 3 met, 1 missed' "$log" || fail "no goals in the bench's note" supported
grep -q '^a_bench: GEMM 8B m=1  0.80 MISS' "$log" || fail "no goal lines printed" supported
grep -q '^  a_bench  *1 s  by  *[0-9]* s$' "$log" || fail "no plan with estimates" supported
# The results: summary.txt and one archive of the run directory.
results="$WORK/out-supported/results"
[[ $(ls "$results" | paste -sd ' ') == "gpu-run.tar.gz summary.txt" ]] ||
  fail "results: $(ls "$results" | paste -sd ' ')" supported
for want in '^kernel_test  *PASS' '^5 passed, 0 failed$' '^a_bench: GEMM 1B m=1  0.95 PASS' \
  '^ldd (Fake GLIBC 2.39)' '^NCCL 2.28.9$' '^Product Name : Fake H200$' '^== a_bench (figures'; do
  grep -q "$want" "$results/summary.txt" || fail "summary.txt has no '$want'" supported
done
grep -q 'Unrelated' "$results/summary.txt" && fail "summary.txt has all of nvidia-smi -q" supported
# (Listings read whole, not piped into grep -q: under pipefail its early exit fails tar.)
archived="$(tar -tzf "$results/gpu-run.tar.gz")"
grep -qx 'run/device_check.log' <<<"$archived" || fail "no log in the archive" supported
grep -qx 'run/kernel_test.memcheck.log' <<<"$archived" || fail "no check log archived" supported
grep -q 'safetensors' <<<"$archived" && fail "a model in the archive" supported
[[ $(tar -xzOf "$results/gpu-run.tar.gz" run/device_check.log | tail -n 1) == "5 passed, 0 failed" ]] ||
  fail "the archived log is not complete" supported

# Without a working xz the pack is unpacked by python3.
FAKE_PATH_HEAD="$WORK/brokenxz:" run noxz || fail "device_check exited $?" noxz
expect_summary noxz "5 passed, 0 failed"
grep -q "unpacked pack.tar.xz .* with python3's lzma" "$WORK/noxz.log" || fail "not unpacked by python3" noxz

# A chatty failing check: its first failure lines come back, and the output stays short
# enough that the whole summary table is in its last 12,000 characters.
if run chatty FAKE_FAIL=1; then fail "a failing check passed" chatty; fi
expect_summary chatty "4 passed, 1 failed"
[[ $(tail -c 12000 "$WORK/chatty.log") == *$'\n== Summary'* ]] ||
  fail "the summary is not in the last 12,000 characters" chatty
(($(wc -c <"$WORK/chatty.log") < 12000)) || fail "$(wc -c <"$WORK/chatty.log") characters of output" chatty
grep -q '^   | plain_test.cc:12: Failure' "$WORK/chatty.log" || fail "no failure excerpt printed" chatty
grep -q '^Expected equality of these values: the first failure line' "$WORK/out-chatty/results/summary.txt" ||
  fail "no failure lines in summary.txt" chatty

run unsupported FAKE_SANITIZER_UNSUPPORTED=1 || fail "a SKIP failed the run" unsupported
expect_summary unsupported "4 passed, 0 failed, 1 skipped"
grep -q '^kernel_test.memcheck  *SKIP .*Device not supported' "$WORK/unsupported.log" ||
  fail "no SKIP for an unsupported device" unsupported

# A second call: only what DEVICE_CHECK_ONLY matches (and the probe) runs; the rest is
# listed as not selected, which does not fail the run.
run only DEVICE_CHECK_ONLY='^(plain_test|kernel_test.memcheck)$' || fail "a selection failed" only
expect_summary only "3 passed, 0 failed, 2 not selected"
[[ $(order only) == "gpu_probe plain_test kernel_test.memcheck" ]] || fail "run order: $(order only)" only
grep -q '^a_bench  *NOT RUN  *0  not selected (DEVICE_CHECK_ONLY=' "$WORK/only.log" ||
  fail "no not-selected line" only

# DEVICE_CHECK_MEMCHECK: 0 runs none, names choose the tests, a non-test is refused.
run nomem DEVICE_CHECK_MEMCHECK=0 || fail "no memcheck failed" nomem
expect_summary nomem "4 passed, 0 failed, 1 not selected"
grep -q '^kernel_test.memcheck  *NOT RUN .*not selected (DEVICE_CHECK_MEMCHECK=0)' "$WORK/nomem.log" ||
  fail "memcheck not listed as not selected" nomem
run mem DEVICE_CHECK_MEMCHECK=plain_test || fail "a chosen memcheck failed" mem
expect_summary mem "5 passed, 0 failed, 1 not selected"
[[ $(order mem) == "gpu_probe kernel_test plain_test a_bench plain_test.memcheck" ]] ||
  fail "run order: $(order mem)" mem
if run badmem DEVICE_CHECK_MEMCHECK=a_bench; then fail "memcheck of a benchmark passed" badmem; fi
grep -q 'DEVICE_CHECK_MEMCHECK names a_bench, which is no packed gtest check' "$WORK/badmem.log" ||
  fail "no refusal" badmem
grep -q '^args:' "$WORK/out-badmem/run/"*.log 2>/dev/null && fail "a check ran after the refusal" badmem

# What cannot fit the budget is NOT RUN with its estimate, and later checks that fit
# still run: a_bench expects 2000 s of a 1000 s budget.
sed 's/^\(check\ta_bench\t20\t.*\t\)1\t0$/\12000\t0/' "$WORK/stage/manifest.tsv" >"$WORK/big.tsv"
grep -q 'a_bench.*2000' "$WORK/big.tsv" || fail "could not edit the manifest" pack
cp -r "$WORK/pack" "$WORK/pack-big" && sed -n '/^# needs/,$p' "$WORK/pack/manifest.tsv" >>"$WORK/big.tsv" &&
  mv "$WORK/big.tsv" "$WORK/pack-big/manifest.tsv"
if PACK_DIR="$WORK/pack-big" run big DEVICE_CHECK_BUDGET_S=1000; then fail "a check not run passed" big; fi
expect_summary big "4 passed, 1 failed (1 of them not run)"
grep -Eq '^== a_bench: NOT RUN \(needs ~2000 s, [0-9]+ s of the 1000 s budget left\)' "$WORK/big.log" ||
  fail "a_bench not NOT RUN for its estimate" big
[[ $(order big) == "gpu_probe kernel_test plain_test kernel_test.memcheck" ]] || fail "run order: $(order big)" big

# A budget smaller than the results' reserve: nothing runs, each said with its reason.
if run spent DEVICE_CHECK_BUDGET_S=4; then fail "a spent budget passed" spent; fi
expect_summary spent "0 passed, 5 failed (5 of them not run)"
for name in gpu_probe kernel_test plain_test kernel_test.memcheck a_bench; do
  grep -Eq "^== $name: NOT RUN \(needs ~[0-9]+ s, 0 s of the 4 s budget left\)" "$WORK/spent.log" ||
    fail "$name not NOT RUN" spent
done

# An old glibc: nothing runs, and the output says why before anything else.
if run oldglibc FAKE_GLIBC=2.35; then fail "an old glibc passed" oldglibc; fi
expect_summary oldglibc "0 passed, 5 failed (5 of them not run)"
grep -q "this machine's C library is glibc 2.35 .*need glibc >= 2.36" "$WORK/oldglibc.log" || fail "no glibc message" oldglibc
grep -q '^== kernel_test: NOT RUN (glibc 2.35 here; the packed binaries and libstdc++ need glibc >= 2.36)' \
  "$WORK/oldglibc.log" || fail "no NOT RUN for the glibc" oldglibc
[[ -z $(order oldglibc) ]] || fail "checks ran: $(order oldglibc)" oldglibc

# No GPU: the probe fails and nothing else runs.
if run nogpu FAKE_NO_GPU=1; then fail "a run without a GPU passed" nogpu; fi
expect_summary nogpu "0 passed, 5 failed (4 of them not run)"
grep -q "^== plain_test: NOT RUN (no usable GPU)" "$WORK/nogpu.log" || fail "no NOT RUN without a GPU" nogpu

# No pack: stops at once with the sentence saying how .gpu/ travels, also in the results.
if PACK_DIR="$WORK/nopack" run nopack; then fail "a run without a pack passed" nopack; fi
grep -q "is git-ignored and reaches the GPU machine only when the device call names it: .*carry \[\".gpu\"\] and timeout_s 540" \
  "$WORK/nopack.log" || fail "no sentence about carrying .gpu" nopack
cmp -s "$WORK/nopack.log" "$WORK/out-nopack/results/summary.txt" || fail "no summary.txt with the sentence" nopack
[[ ! -e $WORK/out-nopack/run ]] || fail "a run directory without a pack" nopack
echo PASS
