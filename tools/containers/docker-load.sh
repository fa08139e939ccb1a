#!/bin/sh
# Copy images from podman's storage (where tools/images/build.py builds them) into docker's, each only
# when docker lacks it or holds another build of it (the image ids differ). Usage: docker-load.sh IMAGE...
set -eu
for image in "$@"; do
    want=$(podman image inspect --format '{{.Id}}' "$image")
    have=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    if [ "$have" != "sha256:$want" ]; then
        podman save --format docker-archive "$image" | docker load
    fi
done
