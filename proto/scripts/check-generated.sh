#!/usr/bin/env bash
# Fails when proto/gen differs from what `buf generate` makes of proto/ now:
# generated code is committed, so a proto edit without regeneration is caught.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/../node_modules/.bin:$PATH"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
buf generate --output "$out"
if ! diff -r "$out/gen" gen >/dev/null; then
  echo "proto/gen is stale: run 'npm run generate' and commit the result" >&2
  diff -r "$out/gen" gen | head -40 >&2
  exit 1
fi
echo "proto/gen is up to date"
