#!/usr/bin/env bash
# make test-deploy, step 1: podman and a base image, then the jetcron image, built for real.
# Where podman cannot run a container at all, say so plainly and fail (never skip).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CONTAINERS_CONF="$PWD/tests/deploy/containers.conf"
BASE=localhost/debian-python:bookworm
IMAGE=${JETCRON_TEST_IMAGE:-localhost/jetcron:test}
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v debootstrap >/dev/null \
   || [ ! -f /etc/ssl/certs/ca-certificates.crt ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap ca-certificates >/dev/null
  fi
fi
if ! command -v podman >/dev/null; then
  echo "make test-deploy: podman is not installed and cannot be installed here (apt-get install podman runc)" >&2
  exit 1
fi
if ! podman image exists "$BASE"; then
  rootfs=build/deploy/rootfs
  if [ ! -x "$rootfs/usr/bin/python3" ]; then
    rm -rf "$rootfs" && mkdir -p build/deploy
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" >/dev/null
  fi
  tar -C "$rootfs" -c . | podman import - "$BASE" >/dev/null
fi
if ! podman run --rm "$BASE" python3 -c 'print("containers run")'; then
  echo "make test-deploy: podman cannot run a container on this machine (see the error above)" >&2
  exit 1
fi
# pip inside the build reaches the package index only with the host's CA bundle (docs/decisions-testing.md).
podman build --quiet --network host --format docker \
  -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
  --build-arg BASE="$BASE" -t "$IMAGE" . >/dev/null
podman image inspect "$IMAGE" --format 'jetcron image {{.Id}}: {{.Size}} bytes'
# The same image with the docker CLI, for the agent that runs `image:` jobs as sibling containers.
podman build --quiet --network host --format docker \
  -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
  --build-arg BASE="$BASE" --build-arg CONTAINER_CLI=docker -t "$IMAGE-docker" . >/dev/null
podman image inspect "$IMAGE-docker" --format 'jetcron image with the docker CLI {{.Id}}: {{.Size}} bytes'
