#!/usr/bin/env bash
# Installs the Kubernetes schema validators the deploy/k8s tests run (validate.mjs:
# npm kubernetes-models, ajv, yaml), pinned by package-lock.json, into
# deploy/k8s/validate/node_modules (git-ignored). Needs node and npm. Idempotent:
# does nothing when that lock file is already installed. Run by `tools/lockstep setup`.
set -euo pipefail

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
marker="$dir/node_modules/.lockstep-installed-lock.json"

if [[ -f "$marker" ]] && cmp -s "$dir/package-lock.json" "$marker"; then
  echo "k8s validators: up to date in $dir/node_modules"
  exit 0
fi
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "k8s validators: $tool is missing" >&2; exit 1; }
done
npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
cp "$dir/package-lock.json" "$marker"
echo "k8s validators: installed in $dir/node_modules"
