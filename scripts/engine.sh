# What the engine scripts share (sourced by docker-engine.sh, slurm-cluster.sh,
# kube-apiserver.sh, kube-registry.sh and kube-torch-image.sh; kube-cluster.sh has it through
# kube-apiserver.sh):
# errors, root checks, timings, package installs and the daemons' pid files.

die() {
    echo "$(basename "$0"): $*" >&2
    exit 1
}

need_root() { # WHAT: exit unless root, saying what needs it
    [ "$(id -u)" = 0 ] || die "must run as root to $1 (try: sudo bash $0 start)"
}

now_ms() { date +%s%3N; }

elapsed() { # T0_MS: the time since T0_MS, as "S.mmm s"
    local ms=$(($(now_ms) - $1))
    printf '%d.%03d s' $((ms / 1000)) $((ms % 1000))
}

# Install the Debian packages named (none: nothing), updating the package lists only when
# the first try fails (a fresh machine may have none yet); waits up to 10 min for another
# apt's lock.
apt_install() {
    [ "$#" -gt 0 ] || return 0
    need_root "install $*"
    echo "installing $* with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    local lock=(-o DPkg::Lock::Timeout=600)
    apt-get install "${lock[@]}" -y -q --no-install-recommends "$@" || {
        apt-get update "${lock[@]}" -q
        apt-get install "${lock[@]}" -y -q --no-install-recommends "$@"
    }
}

pid_alive() { # PIDFILE: true if it names a live process (a zombie counts as gone)
    local pid
    [ -f "$1" ] && pid="$(cat "$1")" && [ -d "/proc/$pid" ] &&
        [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

stop_pid() { # PIDFILE [SECONDS]: SIGTERM its process, wait for it to exit (10 s), then SIGKILL
    local pidfile="$1" wait_s="${2:-10}" pid
    if pid_alive "$pidfile"; then
        pid="$(cat "$pidfile")"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq $((wait_s * 10))); do
            pid_alive "$pidfile" || break
            sleep 0.1
        done
        ! pid_alive "$pidfile" || kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

start_daemon() { # PIDFILE LOGFILE COMMAND...: start COMMAND in the background unless it runs
    pid_alive "$1" && return 0
    local pidfile="$1" log="$2"
    shift 2
    # setsid: a session of its own, so that signals to the starter's process group (a
    # shell's job ending, a killed CI step) do not reach it; only a script's stop ends it
    setsid "$@" </dev/null >"$log" 2>&1 &
    echo $! >"$pidfile"
}
