#!/usr/bin/env bash
# `buf breaking` (rules in proto/buf.yaml: FILE) of proto/ against the last
# released proto. A release is a git tag `proto-vN`; its commit is pinned here
# as well, so a clone that fetched no tags still finds it. Cutting a release:
# tag the commit (`git tag -a proto-v2 <commit>`) and put both names below.
# When neither is in this clone (a shallow clone, an archive without .git) the
# check says so on one line and is skipped; it never skips silently.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/node_modules/.bin:$PATH"

RELEASE_TAG=proto-v1
RELEASE_COMMIT=32cafbb9c7ce87e25ff95a110fb1e7c45dacfa34

skip() {
  echo "check:breaking SKIPPED: $* (buf breaking did not run)"
  exit 0
}

git rev-parse --git-dir >/dev/null 2>&1 || skip "not a git checkout, so the released proto ($RELEASE_TAG) cannot be read"
if tagged=$(git rev-parse -q --verify "refs/tags/$RELEASE_TAG^{commit}"); then
  if [ "$tagged" != "$RELEASE_COMMIT" ]; then
    echo "check:breaking: tag $RELEASE_TAG is $tagged, but proto/scripts/check-breaking.sh pins $RELEASE_COMMIT; make them agree" >&2
    exit 1
  fi
fi
if ! git cat-file -e "$RELEASE_COMMIT^{commit}" 2>/dev/null; then
  # A shallow or partial clone: ask the remote it came from for that one commit.
  git fetch -q --depth=1 origin "$RELEASE_COMMIT" 2>/dev/null || git fetch -q origin "refs/tags/$RELEASE_TAG:refs/tags/$RELEASE_TAG" 2>/dev/null || true
fi
git cat-file -e "$RELEASE_COMMIT^{commit}" 2>/dev/null ||
  skip "the released proto ($RELEASE_TAG, commit ${RELEASE_COMMIT:0:12}) is not in this clone; 'git fetch origin tag $RELEASE_TAG' fetches it"

git_dir=$(git rev-parse --path-format=absolute --git-common-dir)
buf breaking proto --against "$git_dir#ref=$RELEASE_COMMIT,subdir=proto"
echo "proto/ is compatible with $RELEASE_TAG (${RELEASE_COMMIT:0:12}): buf breaking, FILE rules"
