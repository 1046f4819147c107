#!/usr/bin/env bash
# A real Kubernetes API server (kube-apiserver with etcd) on loopback for the kubernetes tests.
#
#   bash scripts/kube-apiserver.sh start    # build once (cached), start etcd and the API server,
#                                           # print the kubeconfig's path as the last line
#   bash scripts/kube-apiserver.sh status   # exit 0 when the API server's /readyz answers
#   bash scripts/kube-apiserver.sh stop     # stop the two daemons this script started, drop their state
#   bash scripts/kube-apiserver.sh restart apiserver|etcd [--down SECONDS]
#                                           # stop one daemon, leave it down SECONDS (0), start it
#                                           # again with its state; returns once /readyz answers
#
# Everything comes from Debian bookworm's packages. `start` as root installs golang-1.19-go,
# golang-github-modern-go-reflect2-dev, etcd-server and rsync with apt-get when missing, then,
# when $CACHE holds no binary yet, builds kube-apiserver from the `kubernetes` source package
# (whose binary package ships only kubectl):
#   - the source comes from `apt-get source`, with a deb-src entry derived from this machine's own
#     apt sources into a private apt directory (the machine's apt configuration is not changed);
#   - it is built as the package's debian/rules builds it: GOPATH mode, `make WHAT=cmd/kube-apiserver`
#     (a module-mode `go build` fails on the generated OpenAPI code);
#   - the vendored github.com/modern-go/reflect2 1.0.1 crashes under Go 1.18 and later (SIGSEGV in
#     mapiterinit on the first custom-object create), so its files are replaced by Debian's 1.0.2;
#   - the source tree, build output and Go cache (about 2.6 GB) are removed afterwards; only the
#     binary (about 110 MB) stays in $CACHE.
# It then starts etcd and kube-apiserver in the background, each with a pid file and log in $STATE,
# bound to 127.0.0.1 only: a self-signed serving certificate, a static token file (one admin token),
# RBAC, no ServiceAccount admission (no controller manager creates service accounts), and a 5 s etcd
# compaction interval so that tests can see `410 Gone`. There is no scheduler, controller manager or
# kubelet: pods stay Pending unless something patches their status.
#
# Environment: ASYNCTORCHX_KUBE_CACHE (binary cache, default /var/cache/asynctorchx/kube-apiserver),
# ASYNCTORCHX_KUBE_STATE (default /var/lib/asynctorchx-kube), ASYNCTORCHX_KUBE_PORT (API server
# port, default 16443), ASYNCTORCHX_KUBE_ETCD_PORT (etcd client port, default 12379; peer port +1).
# See docs/kubernetes.md for measured build and start times.
set -euo pipefail

CACHE="${ASYNCTORCHX_KUBE_CACHE:-/var/cache/asynctorchx/kube-apiserver}"
STATE="${ASYNCTORCHX_KUBE_STATE:-/var/lib/asynctorchx-kube}"
PORT="${ASYNCTORCHX_KUBE_PORT:-16443}"
ETCD_PORT="${ASYNCTORCHX_KUBE_ETCD_PORT:-12379}"
ETCD_PEER_PORT=$((ETCD_PORT + 1))
BIN="$CACHE/kube-apiserver"
GO_BIN="/usr/lib/go-1.19/bin"
REFLECT2_SRC="/usr/share/gocode/src/github.com/modern-go/reflect2"
KUBECONFIG_PATH="$STATE/kubeconfig"
WAIT_S=60

# shellcheck source=scripts/engine.sh
source "$(dirname "${BASH_SOURCE[0]}")/engine.sh"

install_packages() {
    local pkgs=()
    [ -x "$GO_BIN/go" ] || pkgs+=(golang-1.19-go)
    [ -f "$REFLECT2_SRC/reflect2.go" ] || pkgs+=(golang-github-modern-go-reflect2-dev)
    command -v etcd >/dev/null 2>&1 || pkgs+=(etcd-server)
    command -v rsync >/dev/null 2>&1 || pkgs+=(rsync)
    command -v openssl >/dev/null 2>&1 || pkgs+=(openssl)
    apt_install "${pkgs[@]}"
}

# The machine's deb (not deb-src) entries, turned into deb-src entries in a private apt directory.
write_src_sources() {
    local dir="$1" f
    mkdir -p "$dir/sources.list.d" "$dir/lists/partial"
    : >"$dir/sources.list"
    if [ -f /etc/apt/sources.list ]; then
        sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >>"$dir/sources.list"
    fi
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        sed -E 's/^Types:.*/Types: deb-src/' "$f" >"$dir/sources.list.d/$(basename "$f")"
    done
    for f in /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        sed -n 's/^deb /deb-src /p' "$f" >"$dir/sources.list.d/$(basename "$f")"
    done
}

# Builds each of the named commands (kube-apiserver, kubelet, ...) missing from $CACHE, in one
# `make` so that they share the compiled packages; the build runs at the lowest CPU priority.
build_binaries() {
    local missing=() name
    for name in "$@"; do
        [ -x "$CACHE/$name" ] || missing+=("$name")
    done
    [ "${#missing[@]}" -gt 0 ] || return 0
    need_root "build ${missing[*]} into $CACHE"
    local t0 work apt src what=()
    t0="$(now_ms)"
    mkdir -p "$CACHE"
    work="$(mktemp -d "$CACHE/build.XXXXXX")"
    # shellcheck disable=SC2064  # expand $work now: it is local
    trap "rm -rf '$work'" EXIT
    apt="$work/apt"
    write_src_sources "$apt"
    local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/sources.list.d"
        -o "Dir::State::Lists=$apt/lists")
    echo "fetching the kubernetes source package with apt-get source"
    apt-get "${opts[@]}" update -q >"$work/apt-update.log" 2>&1 || {
        cat "$work/apt-update.log" >&2
        die "apt-get update of the derived deb-src entries failed"
    }
    (cd "$work" && apt-get "${opts[@]}" source -q kubernetes >"$work/apt-source.log" 2>&1) || {
        cat "$work/apt-source.log" >&2
        die "apt-get source kubernetes failed"
    }
    src="$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n 1)"
    [ -n "$src" ] || die "apt-get source kubernetes unpacked no kubernetes-* directory"
    rm -rf "$src/vendor/github.com/modern-go/reflect2"
    mkdir -p "$src/vendor/github.com/modern-go/reflect2"
    cp "$REFLECT2_SRC"/*.go "$src/vendor/github.com/modern-go/reflect2/"
    mkdir -p "$src/.go/src/k8s.io"
    ln -s ../../.. "$src/.go/src/k8s.io/kubernetes"
    for name in "${missing[@]}"; do what+=("cmd/$name"); done
    echo "building ${missing[*]} from $(basename "$src") (several minutes per command on one core)"
    (cd "$src" && env PATH="$GO_BIN:$PATH" GOPATH="$src/.go" GOCACHE="$work/go-cache" HOME="$work" \
        CGO_ENABLED=0 GO111MODULE=off GOFLAGS= nice -n 19 make WHAT="${what[*]}" >"$work/make.log" 2>&1) || {
        tail -n 40 "$work/make.log" >&2
        die "make WHAT='${what[*]}' failed"
    }
    if [ -n "${BUILD_EXTRA:-}" ]; then "$BUILD_EXTRA" "$src"; fi
    for name in "${missing[@]}"; do
        install -m 0755 "$src/_output/bin/$name" "$CACHE/$name.new"
        mv "$CACHE/$name.new" "$CACHE/$name"
    done
    basename "$src" >"$CACHE/source-version"
    rm -rf "$work"
    trap - EXIT
    echo "${missing[*]} built in $(elapsed "$t0")"
}

ready() {
    [ -f "$STATE/token" ] || return 1
    curl -fsS --max-time 2 --cacert "$STATE/pki/server.crt" \
        -H "Authorization: Bearer $(cat "$STATE/token")" "https://127.0.0.1:$PORT/readyz" >/dev/null 2>&1
}

write_credentials() {
    mkdir -p "$STATE/pki"
    if [ ! -f "$STATE/pki/server.crt" ]; then
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=kube-apiserver" \
            -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
            -keyout "$STATE/pki/server.key" -out "$STATE/pki/server.crt" 2>/dev/null
        # Signs service-account tokens; required by the API server even with none issued.
        openssl genrsa -out "$STATE/pki/sa.key" 2048 2>/dev/null
    fi
    if [ ! -f "$STATE/token" ]; then
        head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$STATE/token"
        chmod 600 "$STATE/token"
    fi
    printf '%s,admin,admin,system:masters\n' "$(cat "$STATE/token")" >"$STATE/tokens.csv"
    chmod 600 "$STATE/tokens.csv"
    cat >"$KUBECONFIG_PATH" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: asynctorchx-test
  cluster:
    server: https://127.0.0.1:$PORT
    certificate-authority: $STATE/pki/server.crt
users:
- name: admin
  user:
    token: $(cat "$STATE/token")
contexts:
- name: asynctorchx-test
  context:
    cluster: asynctorchx-test
    user: admin
    namespace: default
current-context: asynctorchx-test
EOF
    chmod 600 "$KUBECONFIG_PATH"
}

start_etcd() { # with the data it has (a restart keeps it)
    start_daemon "$STATE/etcd.pid" "$STATE/log/etcd.log" etcd --name asynctorchx --data-dir "$STATE/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "asynctorchx=http://127.0.0.1:$ETCD_PEER_PORT"
}

start_apiserver() {
    start_daemon "$STATE/apiserver.pid" "$STATE/log/apiserver.log" \
        "$BIN" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$PORT" \
        --insecure-port=0 --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
        --etcd-compaction-interval=5s \
        --tls-cert-file="$STATE/pki/server.crt" --tls-private-key-file="$STATE/pki/server.key" \
        --token-auth-file="$STATE/tokens.csv" --authorization-mode=RBAC \
        --disable-admission-plugins=ServiceAccount \
        --service-account-key-file="$STATE/pki/sa.key" \
        --service-account-signing-key-file="$STATE/pki/sa.key" \
        --service-account-issuer=https://kubernetes.default.svc \
        --service-cluster-ip-range=10.96.0.0/16 \
        --kubelet-preferred-address-types=InternalIP
}

wait_ready() {
    local deadline=$((SECONDS + WAIT_S))
    until ready; do
        pid_alive "$STATE/etcd.pid" || {
            tail -n 20 "$STATE/log/etcd.log" >&2
            die "etcd exited (log: $STATE/log/etcd.log)"
        }
        pid_alive "$STATE/apiserver.pid" || {
            tail -n 20 "$STATE/log/apiserver.log" >&2
            die "kube-apiserver exited (log: $STATE/log/apiserver.log)"
        }
        [ "$SECONDS" -lt "$deadline" ] || die "/readyz did not answer within $WAIT_S s (logs: $STATE/log)"
        sleep 0.2
    done
}

start() {
    install_packages
    build_binaries kube-apiserver
    if ready; then
        echo "kube-apiserver already answers on 127.0.0.1:$PORT"
        echo "$KUBECONFIG_PATH"
        return 0
    fi
    need_root "start etcd and kube-apiserver"
    local t0
    t0="$(now_ms)"
    mkdir -p "$STATE/log"
    write_credentials
    if ! pid_alive "$STATE/etcd.pid"; then
        rm -rf "$STATE/etcd"
        start_etcd
    fi
    start_apiserver
    wait_ready
    echo "kube-apiserver ready on 127.0.0.1:$PORT in $(elapsed "$t0")"
    echo "$KUBECONFIG_PATH"
}

restart_daemon() { # apiserver|etcd [--down SECONDS]: stop one daemon, start it again, state kept
    local name="${1:-}" down_s=0
    [ "${2:-}" != --down ] || down_s="${3:?--down needs seconds}"
    case "$name" in apiserver | etcd) ;; *) die "usage: $0 restart apiserver|etcd [--down SECONDS]" ;; esac
    need_root "restart $name"
    stop_pid "$STATE/$name.pid"
    sleep "$down_s"
    "start_$name"
    wait_ready
    echo "$name restarted; the API server answers on 127.0.0.1:$PORT"
}

stop() {
    stop_pid "$STATE/apiserver.pid"
    stop_pid "$STATE/etcd.pid"
    rm -rf "$STATE/etcd"
}

# sourced by kube-cluster.sh for its functions: run nothing then
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

case "${1:-}" in
start) start ;;
stop) stop ;;
restart)
    shift
    restart_daemon "$@"
    ;;
status)
    if ready; then
        echo "kube-apiserver answers on 127.0.0.1:$PORT ($KUBECONFIG_PATH)"
    else
        echo "kube-apiserver does not answer on 127.0.0.1:$PORT"
        exit 1
    fi
    ;;
*) die "usage: $0 start|stop|status|restart apiserver|etcd [--down SECONDS]" ;;
esac
