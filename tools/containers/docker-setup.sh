#!/bin/sh
# Docker for `kubetrain run --runtime docker` and the containers tier under docker (make docker).
#
# Debian's docker.io, with a daemon that leaves the host's firewall alone: by default dockerd sets the
# iptables FORWARD policy to DROP and adds its own chains, which would cut the pod traffic another
# engine or a kubelet routes through this host (the real node's bridge kt0, podman's netavark networks).
# So /etc/docker/daemon.json says "iptables": false, and the package is installed with service starts
# refused (policy-rc.d), so its init script cannot start a daemon with the defaults first. What that
# costs: no NAT and no published ports (the job's containers talk over their network; nothing needs
# either). The daemon is started here, detached, when none answers; its log is /var/log/kubetrain-dockerd.log.
# Usage: docker-setup.sh [PID_FILE]: given PID_FILE, the pid of a daemon started here is written there, so that
# whoever asked (the containers tier: tools/containers/leftovers.py clean) stops it, and only it, afterwards.
set -eu
pid_file=${1:-}
here=$(dirname "$0")
mkdir -p /etc/docker
if ! cmp -s "$here/daemon.json" /etc/docker/daemon.json; then
    cp "$here/daemon.json" /etc/docker/daemon.json
fi
if ! command -v dockerd >/dev/null 2>&1; then
    policy=/usr/sbin/policy-rc.d
    # A machine's own policy-rc.d (container images ship one refusing every start) is kept as it is.
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy"
        chmod 755 "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io
fi
if ! docker info >/dev/null 2>&1; then
    nohup dockerd >>/var/log/kubetrain-dockerd.log 2>&1 </dev/null &
    if [ -n "$pid_file" ]; then
        mkdir -p "$(dirname "$pid_file")"
        echo $! > "$pid_file"
    fi
    tries=0
    until docker info >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ "$tries" -gt 60 ]; then
            tail -20 /var/log/kubetrain-dockerd.log >&2
            exit 1
        fi
        sleep 1
    done
fi
docker info --format '{{.ServerVersion}} {{.Driver}} {{.DefaultRuntime}}'
