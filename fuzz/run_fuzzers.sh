#!/usr/bin/env bash
# Builds every libFuzzer target of //fuzz with --config=fuzz (coverage instrumentation
# and AddressSanitizer, docs/security.md §6) and runs each for SECONDS (default 10) on a
# scratch copy of its corpus, so new inputs never land in the repository. Exits non-zero
# when a target fails to build or a run finds a crash (its input is left as
# OUT/crash-*). Not part of CI: the instrumented build takes minutes.
#
#   fuzz/run_fuzzers.sh [SECONDS] [OUT]      OUT defaults to a new temporary directory
set -euo pipefail

SECONDS_EACH="${1:-10}"
OUT="${2:-$(mktemp -d -t lockstep-fuzz.XXXXXX)}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The libFuzzer binaries are the targets tagged manual (the *_test ones are not).
mapfile -t TARGETS < <(bazel query 'attr(tags, "manual", kind(cc_binary, //fuzz:*))' 2>/dev/null)
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  echo "no libFuzzer targets found under //fuzz" >&2
  exit 1
fi
bazel build --config=fuzz "${TARGETS[@]}"

failed=0
for target in "${TARGETS[@]}"; do
  name="${target##*:}"
  mkdir -p "$OUT/$name"
  # The JSON targets' structure-aware mutator (json_mutator.h) needs room for values
  # nested 100,000 deep; libFuzzer otherwise caps inputs near the corpus' sizes.
  extra=()
  case "$name" in
    openai_request_fuzzer | chat_template_fuzzer) extra=(-max_len=1048576) ;;
  esac
  echo "== $name: ${SECONDS_EACH}s" >&2
  if ! "bazel-bin/fuzz/$name" -max_total_time="$SECONDS_EACH" -timeout=10 "${extra[@]}" \
      -artifact_prefix="$OUT/$name/" "$OUT/$name" "fuzz/corpus/$name" \
      > "$OUT/$name.log" 2>&1; then
    echo "!! $name failed; see $OUT/$name.log and $OUT/$name/" >&2
    failed=1
  else
    tail -n 1 "$OUT/$name.log" >&2
  fi
done
echo "logs and new inputs: $OUT" >&2
exit "$failed"
