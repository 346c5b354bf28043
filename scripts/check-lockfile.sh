#!/usr/bin/env bash
# `npm run check:lockfile`: fails when package-lock.json is not what `npm install`
# writes for the root's and the workspaces' package.json files as they are now —
# a dependency added, removed or re-ranged without the lockfile, which would make
# `npm ci` refuse it or leave a fresh clone's `npm install` with a dirty tree.
#
# The manifests and the lockfile are copied into a temporary directory (nothing
# here is touched), `npm install --package-lock-only` rewrites the copy there,
# and the two lockfiles must be byte for byte the same. An in-sync lockfile needs
# no registry (it resolves from the lockfile itself); a drifted one may ask the
# registry for what it lacks. The lockfile is npm 11's: npm 10 (Node 20's own)
# writes it without the optional packages' `libc` fields, so run it with npm 11.
set -euo pipefail
cd "$(dirname "$0")/.."
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp package.json package-lock.json "$copy/"
# The project's npm settings, should it get any (none today), apply to the copy too.
if [ -f .npmrc ]; then cp .npmrc "$copy/"; fi
# The workspaces as npm expands them: each pattern's directories with a package.json.
for pattern in $(node -p 'require("./package.json").workspaces.join("\n")'); do
  for dir in $pattern; do
    if [ -f "$dir/package.json" ]; then
      mkdir -p "$copy/$dir"
      cp "$dir/package.json" "$copy/$dir/"
    fi
  done
done
if ! (cd "$copy" && npm install --package-lock-only --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error >/dev/null); then
  echo "package-lock.json: npm install --package-lock-only failed on a copy of the manifests (above)" >&2
  exit 1
fi
if ! cmp -s "$copy/package-lock.json" package-lock.json; then
  echo "package-lock.json is not in sync with the package.json files (npm $(npm --version)): run 'npm install' and commit package-lock.json" >&2
  diff -u package-lock.json "$copy/package-lock.json" | head -40 >&2
  exit 1
fi
echo "package-lock.json is in sync with the package.json files"
