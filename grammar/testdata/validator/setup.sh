#!/usr/bin/env bash
# Installs the independent JSON Schema validator the grammar tests run (validate.cjs:
# npm ajv and ajv-formats), pinned by package-lock.json, into
# grammar/testdata/validator/node_modules (git-ignored). Needs node and npm.
# Idempotent: does nothing when that lock file is already installed. Run by
# `tools/lockstep setup`.
set -euo pipefail

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
marker="$dir/node_modules/.lockstep-installed-lock.json"

if [[ -f "$marker" ]] && cmp -s "$dir/package-lock.json" "$marker"; then
  echo "grammar validator: up to date in $dir/node_modules"
  exit 0
fi
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "grammar validator: $tool is missing" >&2; exit 1; }
done
npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
cp "$dir/package-lock.json" "$marker"
echo "grammar validator: installed in $dir/node_modules"
