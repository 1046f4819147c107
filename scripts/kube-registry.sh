#!/usr/bin/env bash
# An image registry on loopback for the kubernetes workspace tests: the scheduler pushes the
# workspace image there (run option image_repo=127.0.0.1:$PORT/<repo>), the node pulls it.
#
#   bash scripts/kube-registry.sh start    # install (if needed) and start the registry, wait until it
#                                          # answers, print its address (127.0.0.1:PORT) as the last line
#   bash scripts/kube-registry.sh status   # exit 0 when it answers
#   bash scripts/kube-registry.sh stop     # stop it and remove its state (every image pushed)
#
# The registry is Debian's `docker-registry` (distribution 2.8), run with a config of its own:
# plain HTTP on 127.0.0.1 only, no auth, storage in $STATE. Not the package's service (it
# listens on every interface, port 5000). Plain HTTP on loopback needs no setting in Docker:
# the engine treats 127.0.0.0/8 as an insecure registry by default; nor in the node's
# containerd (scripts/kube-cluster.sh): its CRI plugin pulls from localhost hosts over http.
#
# Environment: ASYNCTORCHX_KUBE_REGISTRY_PORT (default 17500), ASYNCTORCHX_KUBE_REGISTRY_STATE
# (default /var/lib/asynctorchx-kube-registry).
set -euo pipefail

PORT="${ASYNCTORCHX_KUBE_REGISTRY_PORT:-17500}"
STATE="${ASYNCTORCHX_KUBE_REGISTRY_STATE:-/var/lib/asynctorchx-kube-registry}"
WAIT_S=30

# shellcheck source=scripts/engine.sh
source "$(dirname "$0")/engine.sh"

ready() {
    curl -fsS --max-time 2 "http://127.0.0.1:$PORT/v2/" >/dev/null 2>&1
}

start_registry() {
    if ready; then
        echo "127.0.0.1:$PORT"
        return 0
    fi
    command -v docker-registry >/dev/null 2>&1 || apt_install docker-registry
    mkdir -p "$STATE/storage"
    cat >"$STATE/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $STATE/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$PORT
EOF
    start_daemon "$STATE/registry.pid" "$STATE/registry.log" docker-registry serve "$STATE/config.yml"
    local deadline=$((SECONDS + WAIT_S))
    until ready; do
        pid_alive "$STATE/registry.pid" || die "docker-registry exited; its log: $STATE/registry.log"
        [ "$SECONDS" -lt "$deadline" ] || die "no answer on 127.0.0.1:$PORT in ${WAIT_S} s; log: $STATE/registry.log"
        sleep 0.2
    done
    echo "127.0.0.1:$PORT"
}

stop_registry() {
    stop_pid "$STATE/registry.pid" 5
    rm -rf "$STATE"
}

case "${1:-}" in
start) start_registry ;;
stop) stop_registry ;;
status)
    if ready; then
        echo "registry answers on 127.0.0.1:$PORT"
    else
        echo "no registry on 127.0.0.1:$PORT"
        exit 1
    fi
    ;;
*) die "usage: $0 start|status|stop" ;;
esac
