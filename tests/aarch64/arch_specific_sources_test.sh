#!/usr/bin/env bash
# Compiles each source given (`-fsyntax-only`, warnings as errors) for AArch64 with
# clang++-14 and the cross sysroot of g++-aarch64-linux-gnu (tools/lockstep setup). The
# libraries' headers (Abseil) are this machine's, searched after the sysroot's: they are
# the same on both architectures. Fails naming every source that does not compile.
set -uo pipefail

if ! command -v clang++-14 >/dev/null || [[ ! -d /usr/aarch64-linux-gnu/include ]]; then
  echo "FAIL: clang++-14 or the AArch64 sysroot is missing (tools/lockstep setup installs g++-aarch64-linux-gnu)"
  exit 1
fi
if [[ $# -eq 0 ]]; then
  echo "FAIL: no source given"
  exit 1
fi
failed=()
for source in "$@"; do
  if clang++-14 --target=aarch64-linux-gnu -std=c++20 -fsyntax-only -Wall -Werror -I. \
    -idirafter /usr/include "$source"; then
    echo "ok: $source"
  else
    failed+=("$source")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAIL: not compiling for AArch64: ${failed[*]}"
  exit 1
fi
echo "PASS: $# sources compile for AArch64"
