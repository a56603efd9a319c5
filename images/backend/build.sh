#!/usr/bin/env bash
# Builds the backend's deployment image dreadnode/backend:latest locally: a
# static binary (CGO_ENABLED=0; the SQLite driver is pure Go) FROM scratch,
# so no registry is needed. Run from anywhere; `make image-backend` calls it.
#
# Usage: images/backend/build.sh [IMAGE]   (default dreadnode/backend:latest,
#        or DREADNODE_BACKEND_IMAGE)
#
# Run it with the Docker provider (the default) by handing it the engine, on
# the host's network (the router dials sandboxes, which publish no port):
#   docker run -d --network host -e DREADNODE_LISTEN=127.0.0.1:8080 \
#     -v /var/run/docker.sock:/var/run/docker.sock -v dreadnode-data:/data dreadnode/backend:latest
set -euo pipefail

IMAGE="${1:-${DREADNODE_BACKEND_IMAGE:-dreadnode/backend:latest}}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT

cd "$root"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$ctx/dreadnode-backend" ./backend/cmd/dreadnode-backend
# The in-sandbox agent rides along (the backend finds it beside itself).
CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o "$ctx/dn-agent" ./backend/cmd/dn-agent
cp "$here/Dockerfile" "$ctx/"
cert=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$cert" ]; then
	echo "build.sh: $cert is missing; install Debian's ca-certificates package (the E2B provider needs it in the image)" >&2
	exit 1
fi
cp "$cert" "$ctx/"
mkdir -m 1777 "$ctx/tmp"

if ! out=$(docker build -q -t "$IMAGE" "$ctx" 2>&1); then
	echo "$out" >&2
	echo "build.sh: docker build of $IMAGE failed" >&2
	exit 1
fi
echo "built $IMAGE"
