#!/bin/sh
# Podman for `kubetrain run --runtime podman` and the containers tier: installed only when missing.
# Debian 12's podman 4.3 uses netavark with aardvark-dns, which gives a user network's containers DNS
# by name and network alias (a Recommends of podman, named here so --no-install-recommends cannot drop it).
set -eu
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 \
    || [ ! -x /usr/lib/podman/aardvark-dns ]; then
    apt-get update
    apt-get install -y podman netavark aardvark-dns runc busybox-static
fi
conf=/etc/containers/containers.conf.d/50-kubetrain.conf
# Hybrid cgroups (a cgroup v1 hierarchy with v2 mounted at unified/) need runc and the ulimits of
# tools/containers/kubetrain.conf; a host with plain cgroup v2 runs podman's defaults.
if [ -d /sys/fs/cgroup/unified ] && ! cmp -s "$(dirname "$0")/kubetrain.conf" "$conf"; then
    mkdir -p "$(dirname "$conf")"
    cp "$(dirname "$0")/kubetrain.conf" "$conf"
fi
podman info --format '{{.Host.NetworkBackend}} {{.Host.OCIRuntime.Name}}'
