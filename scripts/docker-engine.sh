#!/usr/bin/env bash
# Docker engine for asynctorchx tests and benchmarks, without any image registry.
#
#   bash scripts/docker-engine.sh start    # install (if needed), start dockerd, make test image
#   bash scripts/docker-engine.sh status   # exit 0 when the engine answers and the image exists
#   bash scripts/docker-engine.sh stop     # stop the dockerd this script started
#   bash scripts/docker-engine.sh restart [--live-restore] [--down SECONDS]
#       # stop the dockerd this script started (without live-restore its containers are
#       # killed: dockerd stops them), leave it down SECONDS (0), start it again, with
#       # --live-restore if asked (containers keep running across the next restart);
#       # returns once it answers
#
# `start` as root: installs Debian's docker.io and busybox-static with apt-get when dockerd or
# busybox are missing, starts dockerd in the background when `docker info` fails (log in
# /tmp/dockerd.log), waits at most 60 s for the socket, then makes the image
# asynctorchx-test/busybox:latest from a busybox root filesystem with `docker import` when it
# is missing. Nothing is pulled from a registry.
set -euo pipefail

IMAGE="asynctorchx-test/busybox:latest"
LOG="/tmp/dockerd.log"
PIDFILE="/tmp/asynctorchx-dockerd.pid"
WAIT_S=60

# shellcheck source=scripts/engine.sh
source "$(dirname "$0")/engine.sh"

install_packages() {
    local pkgs=()
    command -v dockerd >/dev/null 2>&1 || pkgs+=(docker.io)
    { command -v busybox >/dev/null 2>&1 && busybox_is_static; } || pkgs+=(busybox-static)
    apt_install "${pkgs[@]}"
    command -v docker >/dev/null 2>&1 || die "no docker CLI on PATH after installing docker.io"
}

busybox_is_static() {
    # A dynamically linked busybox cannot run inside an empty root filesystem.
    local bb
    bb="$(command -v busybox)"
    ! ldd "$bb" >/dev/null 2>&1
}

engine_up() {
    docker info >/dev/null 2>&1
}

start_engine() { # [DOCKERD ARGS...]
    if engine_up; then
        echo "docker engine already answers"
        return 0
    fi
    need_root "start dockerd"
    echo "starting dockerd $* (log: $LOG)"
    start_daemon "$PIDFILE" "$LOG" dockerd "$@"
    local i
    for ((i = 0; i < WAIT_S * 2; i++)); do
        if engine_up; then
            echo "docker engine up after $((i / 2)) s"
            return 0
        fi
        if ! pid_alive "$PIDFILE"; then
            echo "dockerd exited; last lines of $LOG:" >&2
            tail -n 30 "$LOG" >&2 || true
            die "dockerd did not start"
        fi
        sleep 0.5
    done
    echo "last lines of $LOG:" >&2
    tail -n 30 "$LOG" >&2 || true
    die "docker engine did not answer within ${WAIT_S} s"
}

make_image() {
    if docker image inspect "$IMAGE" >/dev/null 2>&1; then
        echo "image $IMAGE present"
        return 0
    fi
    echo "building $IMAGE from busybox-static with docker import"
    local root
    root="$(mktemp -d)"
    mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin" "$root/tmp" "$root/etc" \
        "$root/root" "$root/proc" "$root/sys" "$root/dev" "$root/workspace"
    chmod 1777 "$root/tmp"
    cp "$(command -v busybox)" "$root/bin/busybox"
    chroot "$root" /bin/busybox --install -s
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' \
        >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
    tar -C "$root" -c . | docker import \
        --change 'CMD ["/bin/sh"]' \
        --change 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' \
        - "$IMAGE" >/dev/null
    rm -rf "$root"
    docker image inspect "$IMAGE" >/dev/null || die "docker import did not produce $IMAGE"
    echo "image $IMAGE built"
}

case "${1:-}" in
start)
    install_packages
    start_engine
    make_image
    ;;
status)
    engine_up || die "no docker engine answers"
    docker image inspect "$IMAGE" >/dev/null 2>&1 || die "image $IMAGE missing"
    echo "docker engine up, image $IMAGE present"
    ;;
restart)
    shift
    flags=() down_s=0
    while [ $# -gt 0 ]; do
        case "$1" in
        --live-restore) flags+=(--live-restore) ;;
        --down) down_s="${2:?--down needs seconds}" && shift ;;
        *) die "usage: $0 restart [--live-restore] [--down SECONDS]" ;;
        esac
        shift
    done
    pid_alive "$PIDFILE" || die "no dockerd started by this script is running: start it first"
    stop_pid "$PIDFILE" 30
    sleep "$down_s"
    start_engine "${flags[@]}"
    ;;
stop)
    if pid_alive "$PIDFILE"; then
        # waits for it to exit (30 s at most): a start meanwhile would find its pid file
        # ("pid file found, ensure docker is not running") and fail
        stop_pid "$PIDFILE" 30
        echo "dockerd stopped"
    else
        echo "no dockerd started by this script is running"
    fi
    ;;
*)
    echo "usage: $0 start|status|stop|restart [--live-restore] [--down SECONDS]" >&2
    exit 2
    ;;
esac
