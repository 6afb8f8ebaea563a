#!/usr/bin/env bash
# CRC32C on AArch64 (the Grace hosts of GB300-class nodes), which this machine cannot
# run natively: builds crc32c.cc with testing/crc32c_check_main.cc for AArch64 (clang++-14
# with Debian's cross sysroot, g++-aarch64-linux-gnu) and runs it under qemu-aarch64 as a
# Neoverse N1 (which has the CRC32 extension): every path must match the byte table, and
# the crc32 instruction must be the path taken. `tools/lockstep setup` installs both.
set -euo pipefail

for tool in clang++-14 qemu-aarch64; do
  if ! command -v "$tool" >/dev/null; then
    echo "FAIL: $tool is missing (tools/lockstep setup installs qemu-user and g++-aarch64-linux-gnu)"
    exit 1
  fi
done
dir=runtime/transfer
binary="${TEST_TMPDIR:-$(mktemp -d)}/crc32c_check"
clang++-14 --target=aarch64-linux-gnu -std=c++20 -O2 -Wall -Werror -I. -static \
  "$dir/crc32c.cc" "$dir/testing/crc32c_check_main.cc" -o "$binary"
set +e
output="$(qemu-aarch64 -cpu neoverse-n1 "$binary" "${LOCKSTEP_TEST_SEED:-20261207}")"
rc=$?
set -e
echo "$output"
if [[ $rc -ne 0 ]]; then
  echo "FAIL: the AArch64 self-check exited with status $rc"
  exit 1
fi
if ! grep -qx "fastest: crc32 instruction" <<<"$output"; then
  echo "FAIL: the AArch64 build does not take the crc32 instruction on a CPU that has it"
  exit 1
fi
echo "PASS"
