#!/usr/bin/env bash
# Installs what tests/e2e/openai_client_test drives a deployment with (client.mjs): the
# official OpenAI client (npm openai) and an independent JSON Schema validator (npm
# ajv), pinned by package-lock.json, into tests/e2e/openai_client/node_modules
# (git-ignored). Needs node and npm. Idempotent: does nothing when that lock file is
# already installed. Run by `tools/lockstep setup`.
set -euo pipefail

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
marker="$dir/node_modules/.lockstep-installed-lock.json"

if [[ -f "$marker" ]] && cmp -s "$dir/package-lock.json" "$marker"; then
  echo "openai client: up to date in $dir/node_modules"
  exit 0
fi
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "openai client: $tool is missing" >&2; exit 1; }
done
npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
cp "$dir/package-lock.json" "$marker"
echo "openai client: installed in $dir/node_modules"
