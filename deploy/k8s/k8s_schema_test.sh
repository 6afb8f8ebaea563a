#!/usr/bin/env bash
# Validates the checked-in example manifests (deploy/k8s/examples/*) against the
# Kubernetes schemas (deploy/k8s/validate/validate.mjs), and checks that the validator
# rejects a broken manifest. Needs node and the validators from
# deploy/k8s/validate/setup.sh (`tools/lockstep setup`): fails, never skips, without them.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }

# The runfiles link into the source tree, where setup.sh installed node_modules.
validate="$(readlink -f deploy/k8s/validate/validate.mjs)"
dir="$(dirname "$validate")"
examples="$(cd "$(dirname "$(readlink -f deploy/k8s/examples/gb300_disagg/router.yaml)")/.." && pwd)"
command -v node >/dev/null || fail "node is missing: run tools/lockstep setup"
[[ -d $dir/node_modules/kubernetes-models ]] ||
  fail "the validators are not installed in $dir/node_modules: run tools/lockstep setup"

for example in "$examples"/*/; do
  echo "== $example"
  node "$validate" "$example" || fail "$example does not validate"
done

# The validator must catch what the API server would reject.
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
bad="$tmp/bad"
mkdir -p "$bad"
# An env value that is a number (not a string) in a StatefulSet.
sed 's/value: "1"/value: 1/' "$examples/gb300_disagg/gen.yaml" >"$bad/gen.yaml"
grep -q 'value: 1$' "$bad/gen.yaml" || fail "the broken copy was not made"
if node "$validate" "$bad" >"$tmp/out.txt"; then fail "a numeric env value passed validation"; fi
grep -q "must be string" "$tmp/out.txt" || fail "unexpected report: $(cat "$tmp/out.txt")"
# A Secret whose token is not a string.
rm -f "$bad"/*
sed 's/^  token: .*/  token: 12/' "$examples/gb300_disagg/secret.yaml" >"$bad/secret.yaml"
grep -q 'token: 12$' "$bad/secret.yaml" || fail "the broken Secret was not made"
if node "$validate" "$bad" >"$tmp/out.txt"; then fail "a numeric Secret value passed validation"; fi
grep -q "must be string" "$tmp/out.txt" || fail "unexpected report: $(cat "$tmp/out.txt")"
# An unknown LeaderWorkerSet field.
sed 's/^\( *\)restartPolicy: RecreateGroupOnPodRestart$/&\n\1sizeTypo: 2/' \
  "$examples/gb300_disagg_lws/gen.yaml" >"$bad/gen.yaml"
if node "$validate" "$bad/gen.yaml" >"$tmp/out.txt"; then fail "an unknown LWS field passed"; fi
grep -q "must NOT have additional properties" "$tmp/out.txt" || fail "unexpected: $(cat "$tmp/out.txt")"
echo "PASS"
