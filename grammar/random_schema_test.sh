#!/usr/bin/env bash
# 1,000 seeded random schemas (testing_schemas.h): each is compiled, an output is
# sampled through the Matcher with random logits at temperature 1, and the independent
# validator (npm ajv + ajv-formats, grammar/testdata/validator) must accept every
# output. Failures print their seed. Needs node and the validator from
# grammar/testdata/validator/setup.sh (`tools/lockstep setup`): fails, never skips.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }

cases_bin="grammar/random_schema_cases"
# The runfiles link into the source tree, where setup.sh installed node_modules.
validate="$(readlink -f grammar/testdata/validator/validate.cjs)"
dir="$(dirname "$validate")"
command -v node >/dev/null || fail "node is missing: run tools/lockstep setup"
[[ -d $dir/node_modules/ajv-formats ]] ||
  fail "the validator is not installed in $dir/node_modules: run tools/lockstep setup"

tmp="${TEST_TMPDIR:-$(mktemp -d)}"
"$cases_bin" "${GRAMMAR_SCHEMA_COUNT:-1000}" "${GRAMMAR_SCHEMA_SEED:-1}" "$tmp/cases.jsonl" ||
  fail "sampling failed (seeds above)"
node "$validate" "$tmp/cases.jsonl" || fail "the validator rejected outputs (seeds above)"

# The validator itself must catch a wrong output.
echo '{"seed": 0, "schema": {"type": "integer", "maximum": 3}, "output": "4"}' >"$tmp/bad.jsonl"
if node "$validate" "$tmp/bad.jsonl" >"$tmp/out.txt"; then fail "an invalid output passed validation"; fi
grep -q "must be <= 3" "$tmp/out.txt" || fail "unexpected report: $(cat "$tmp/out.txt")"
echo "PASS"
