#!/bin/sh
# Starts the service this image was built for (DBAAS_SERVICE, fixed by the
# Dockerfile's SERVICE build argument). `--check` only verifies that the entry
# point exists, so a bad SERVICE fails the build rather than the first start.
set -eu

case "${DBAAS_SERVICE:-}" in
  gateway) entry=gateway/src/main.ts ;;
  identity | databases | billing | provisioner-agent) entry="services/$DBAAS_SERVICE/src/main.ts" ;;
  *)
    echo "entrypoint: DBAAS_SERVICE must be gateway, identity, databases, billing or provisioner-agent (got '${DBAAS_SERVICE:-}')" >&2
    exit 64
    ;;
esac

# The repository root: `node --import tsx` resolves tsx from the working directory.
cd "$(dirname "$0")/../.."
if [ ! -f "$entry" ]; then
  echo "entrypoint: $entry is missing from the image" >&2
  exit 66
fi
if [ "${1:-}" = "--check" ]; then
  echo "entrypoint: $DBAAS_SERVICE runs $entry"
  exit 0
fi

# exec: node replaces this shell, so tini's signals (docker stop, SIGTERM from
# Kubernetes) reach the service's own graceful-shutdown handlers.
exec node --import tsx "$entry" "$@"
