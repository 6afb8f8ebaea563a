#!/usr/bin/env bash
# The two-communicator rule (docs/design.md §10): after a NcclGroup's start, nothing on
# its path may synchronize the device implicitly, or the executor's and the engine's
# NCCL kernels on one GPU can deadlock each other. Checks nccl_group.cc: no synchronous
# copy, memset or synchronize anywhere; allocations only in NcclGroup::Start; frees only
# in the destructor.
set -euo pipefail
src="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-lockstep}/runtime/cuda/nccl_group.cc"
[[ -f "$src" ]] || src="runtime/cuda/nccl_group.cc"
fail=0
# Name of the enclosing function of every line (a definition starts at column 0 and
# ends at the next line that is a lone "}").
annotated=$(perl -ne '
  $fn = $1 if /^(?=[A-Za-z]).*?(NcclGroup::~?[A-Za-z]+)\(/;
  print "$fn\t$_";
  $fn = "" if /^}/;' "$src")
check() {  # check PATTERN ALLOWED_FUNCTION(or "") WHAT
  local pattern=$1 allowed=$2 what=$3
  while IFS=$'\t' read -r fn line; do
    if [[ -z "$allowed" || "$fn" != "$allowed" ]]; then
      echo "nccl_group.cc: $what ${allowed:+outside $allowed }(in ${fn:-file scope}): $line"
      fail=1
    fi
  done < <(grep -P "^[^\t]*\t.*$pattern" <<<"$annotated" | grep -v '^\s*//' || true)
}
check '\bcuda(Memcpy|Memset)\(' '' "a synchronous copy or memset"
check '\bcuda(Device|Stream|Event)Synchronize\(' '' "a synchronize"
check '\bcudaMalloc(Host)?\(' 'NcclGroup::Start' "an allocation"
check '\bcudaFree(Host)?\(' 'NcclGroup::~NcclGroup' "a free"
if [[ $fail -ne 0 ]]; then exit 1; fi
echo "nccl_group.cc keeps the two-communicator rule"
