#!/usr/bin/env bash
# A real one-node Kubernetes cluster on loopback for the kubernetes tests: pods really run.
#
#   bash scripts/kube-cluster.sh start [--no-node]  # build once (cached), start etcd, the API server
#                                                   # and the node, wait until the node is Ready,
#                                                   # print the kubeconfig's path as the last line
#   bash scripts/kube-cluster.sh status             # exit 0 when the node is Ready
#   bash scripts/kube-cluster.sh load IMAGE...      # put images of the local Docker engine on the node
#                                                   # (one it has with the same ID is skipped)
#   bash scripts/kube-cluster.sh logs               # where each daemon's log is
#   bash scripts/kube-cluster.sh restart apiserver|etcd [--down SECONDS]
#                                                   # kube-apiserver.sh's restart, of this cluster
#   bash scripts/kube-cluster.sh stop               # remove everything `start` started
#
# The API server and etcd are scripts/kube-apiserver.sh's (sourced; its own ports and state
# here, so that a bare server of kube-apiserver.sh can run beside). The node is built from the
# same Debian `kubernetes` source package (1.20.2), in the same way, into the same cache:
# kubelet, kube-controller-manager, kube-scheduler and kube-proxy, and the static `pause` of
# build/pause/linux/pause.c, imported as the sandbox image (nothing is pulled). Then:
#   - a second containerd (Debian's; Docker's own instance disables the CRI plugin) with its own
#     state and socket in $STATE/containerd and its root (the images `load` put there) in
#     $CACHE/node-images, kept by `stop`, `restrict_oom_score_adj` (root here lacks
#     CAP_SYS_RESOURCE, which the kubelet's Docker shim needs), CNI from Debian's
#     containernetworking-plugins: the bridge $BRIDGE with host-local IPAM on $POD_CIDR; it
#     pulls from a registry on 127.0.0.1 (scripts/kube-registry.sh) over plain HTTP with no
#     registry setting (the CRI plugin's default scheme for localhost hosts is http);
#   - the kubelet on that runtime, named $NODE, serving on 127.0.0.1:$KUBELET_PORT with
#     `--node-ip=127.0.0.1` (it refuses a loopback node IP and then leaves the Node's addresses
#     alone: `start` patches the Node's InternalIP to 127.0.0.1 once, so that the API server
#     reaches it on loopback for logs; never the machine's own interface), and a cluster DNS
#     as every cluster has one: `--cluster-domain=$CLUSTER_DOMAIN`, `--cluster-dns` the
#     bridge's own address $CLUSTER_DNS, so that pods' resolv.conf and /etc/hosts name pods as
#     on any cluster (`{hostname}.{subdomain}.{namespace}.svc.$CLUSTER_DOMAIN`). No DNS server
#     runs there: the tests that resolve pod names bring a stand-in for one (CoreDNS is not
#     packaged by Debian); the kubelet reports both in its /configz;
#   - kube-controller-manager (without the service-account token controller), kube-scheduler and
#     kube-proxy (iptables mode), each bound to 127.0.0.1;
#   - two FORWARD ACCEPT rules for the pod bridge (Docker's FORWARD policy is DROP); kube-proxy
#     sets net.ipv4.conf.all.route_localnet, which `stop` restores.
# No DNS server, no Volcano/JobSet/Kueue: the tests bring stand-ins for those. `start` on a
# node that runs with other kubelet arguments (an older version of this script) restarts it.
# `stop` removes the pods (through the kubelet, so that CNI releases their network), the
# daemons, kube-proxy's chains, the FORWARD rules, the bridge and the state directory; the
# images `load` put on the node stay in containerd's root, $CACHE/node-images, for the next start.
#
# Environment: ASYNCTORCHX_KUBE_CACHE (binary cache, default /var/cache/asynctorchx/kube-apiserver),
# ASYNCTORCHX_KUBE_NODE_STATE (default /var/lib/asynctorchx-kube-node), ASYNCTORCHX_KUBE_NODE_PORT
# (API server port, default 17443; etcd on 13379-13380, the node's daemons on 17248-17259).
set -euo pipefail

export ASYNCTORCHX_KUBE_STATE="${ASYNCTORCHX_KUBE_NODE_STATE:-/var/lib/asynctorchx-kube-node}"
export ASYNCTORCHX_KUBE_PORT="${ASYNCTORCHX_KUBE_NODE_PORT:-17443}"
export ASYNCTORCHX_KUBE_ETCD_PORT=13379
# shellcheck source=scripts/kube-apiserver.sh
source "$(dirname "$0")/kube-apiserver.sh"

NODE_BINARIES=(kubelet kube-controller-manager kube-scheduler kube-proxy)
NODE="asynctorchx-node"
BRIDGE="atxkube0"
POD_CIDR="10.244.0.0/24"
CLUSTER_DNS="10.244.0.1" # the bridge's address: CNI's gateway of $POD_CIDR
CLUSTER_DOMAIN="cluster.local"
KUBELET_PORT=17250
KUBELET_HEALTHZ_PORT=17248
PROXY_HEALTHZ_PORT=17256
PROXY_METRICS_PORT=17249
CONTROLLERS_PORT=17257
SCHEDULER_PORT=17259
PAUSE_IMAGE="docker.io/asynctorchx/pause:3.4"
CTR_DIR="$STATE/containerd"
# containerd's root (its image content, snapshots and metadata): in the cache, so that the
# images `load` put on the node stay there from one `stop` to the next `start`, as on a real
# node; every container is removed at `stop` (and at `start`, when a node was not stopped)
IMAGE_STORE="$CACHE/node-images"
SOCK="$CTR_DIR/containerd.sock"
NODE_WAIT_S=120
# the rules that let pods' traffic through Docker's FORWARD policy
FORWARD_RULES=("-i $BRIDGE -j ACCEPT" "-o $BRIDGE -j ACCEPT")

build_pause() {
    gcc -Os -static -o "$CACHE/pause.new" "$1/build/pause/linux/pause.c"
    mv "$CACHE/pause.new" "$CACHE/pause"
}

node_packages() {
    local pkgs=()
    command -v containerd >/dev/null 2>&1 || pkgs+=(containerd)
    [ -x /usr/lib/cni/bridge ] || pkgs+=(containernetworking-plugins)
    command -v gcc >/dev/null 2>&1 || pkgs+=(gcc libc6-dev)
    command -v iptables >/dev/null 2>&1 || pkgs+=(iptables)
    apt_install "${pkgs[@]}"
}

build_node() {
    install_packages
    node_packages
    # the pause binary comes from the source tree: rebuild it with the node's binaries
    [ -x "$CACHE/pause" ] || rm -f "$CACHE/kubelet"
    BUILD_EXTRA=build_pause build_binaries kube-apiserver "${NODE_BINARIES[@]}"
}

api() { # METHOD PATH [merge-patch body]: the API server's answer, as admin
    local args=(-fsS --max-time 10 --cacert "$STATE/pki/server.crt" -H "Authorization: Bearer $(cat "$STATE/token")"
        -X "$1")
    [ $# -lt 3 ] || args+=(-H "Content-Type: application/merge-patch+json" --data "$3")
    curl "${args[@]}" "https://127.0.0.1:$PORT$2"
}

NODE_DAEMONS=(containerd kubelet kube-controller-manager kube-scheduler kube-proxy)

node_ready() { # every node daemon runs, and the API server reports the Node Ready
    local name
    for name in "${NODE_DAEMONS[@]}"; do
        pid_alive "$STATE/$name.pid" || return 1
    done
    ready || return 1
    api GET "/api/v1/nodes/$NODE" 2>/dev/null | python3 -c '
import json, sys
node = json.load(sys.stdin)
ready = [c for c in node["status"].get("conditions", []) if c["type"] == "Ready"]
sys.exit(0 if ready and ready[0]["status"] == "True" else 1)' 2>/dev/null
}

start_node_daemon() { # NAME COMMAND...: start_daemon with its pid file and log in $STATE
    local name="$1"
    shift
    start_daemon "$STATE/$name.pid" "$STATE/log/$name.log" "$@"
}

write_node_config() {
    mkdir -p "$CTR_DIR" "$STATE/cni" "$STATE/kubelet"
    cat >"$CTR_DIR/config.toml" <<EOF
version = 2
root = "$IMAGE_STORE"
state = "$CTR_DIR/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CTR_DIR/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni"
EOF
    cat >"$STATE/cni/10-asynctorchx.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "asynctorchx", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "dataDir": "$STATE/cni-ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
}

load_pause() {
    ctr -a "$SOCK" -n k8s.io images ls -q | grep -qx "$PAUSE_IMAGE" && return 0
    local dir
    dir="$(mktemp -d)"
    cp "$CACHE/pause" "$dir/pause"
    printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$dir/Dockerfile"
    docker build -q -t "${PAUSE_IMAGE#docker.io/}" "$dir" >"$STATE/log/pause-build.log" 2>&1 ||
        die "docker build of the pause image failed (log: $STATE/log/pause-build.log)"
    rm -rf "$dir"
    docker save "${PAUSE_IMAGE#docker.io/}" | ctr -a "$SOCK" -n k8s.io images import - >/dev/null
}

wait_for() { # WHAT SECONDS COMMAND...: poll COMMAND until it succeeds, checking the daemons
    local what="$1" deadline=$((SECONDS + $2)) name
    shift 2
    until "$@"; do
        for name in "${NODE_DAEMONS[@]}"; do
            [ -f "$STATE/$name.pid" ] || continue
            pid_alive "$STATE/$name.pid" || {
                tail -n 20 "$STATE/log/$name.log" >&2
                die "$name exited (log: $STATE/log/$name.log)"
            }
        done
        [ "$SECONDS" -lt "$deadline" ] || die "$what not within $(($2)) s (logs: $STATE/log)"
        sleep 0.5
    done
}

kubelet_args() { # the kubelet's arguments, one a line
    printf '%s\n' --kubeconfig="$KUBECONFIG_PATH" --hostname-override="$NODE" \
        --container-runtime=remote --container-runtime-endpoint="unix://$SOCK" \
        --pod-infra-container-image="$PAUSE_IMAGE" \
        --root-dir="$STATE/kubelet" --cert-dir="$STATE/kubelet/pki" \
        --fail-swap-on=false --cgroup-driver=cgroupfs --cgroups-per-qos=false --enforce-node-allocatable= \
        --node-ip=127.0.0.1 --address=127.0.0.1 --port="$KUBELET_PORT" --read-only-port=0 \
        --healthz-bind-address=127.0.0.1 --healthz-port="$KUBELET_HEALTHZ_PORT" \
        --cluster-dns="$CLUSTER_DNS" --cluster-domain="$CLUSTER_DOMAIN"
}

remove_containers() { # every container of the node's containerd, with its task and snapshot
    local id
    for id in $(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
        ctr -a "$SOCK" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
        ctr -a "$SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr -a "$SOCK" -n k8s.io containers ls -q 2>/dev/null); do
        ctr -a "$SOCK" -n k8s.io containers delete "$id" >/dev/null 2>&1 || true
    done
}

start_node() {
    local kubeconfig="$KUBECONFIG_PATH" rule args
    write_node_config
    start_node_daemon containerd containerd --config "$CTR_DIR/config.toml"
    wait_for "containerd's socket" 30 ctr -a "$SOCK" version >/dev/null
    remove_containers # a node's left in the image store when it was not stopped
    load_pause
    for rule in "${FORWARD_RULES[@]}"; do
        # shellcheck disable=SC2086  # a rule is several words
        iptables -C FORWARD $rule 2>/dev/null || iptables -I FORWARD $rule
    done
    mapfile -t args < <(kubelet_args)
    kubelet_args >"$STATE/kubelet.args" # what `start` compares a running node with
    start_node_daemon kubelet "$CACHE/kubelet" "${args[@]}"
    start_node_daemon kube-controller-manager "$CACHE/kube-controller-manager" --kubeconfig="$kubeconfig" \
        --bind-address=127.0.0.1 --secure-port="$CONTROLLERS_PORT" --port=0 --leader-elect=false \
        --controllers='*,-serviceaccount-token'
    start_node_daemon kube-scheduler "$CACHE/kube-scheduler" --kubeconfig="$kubeconfig" \
        --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --port=0 --leader-elect=false
    # kube-proxy sets route_localnet: stop restores the machine's value
    [ -f "$STATE/route_localnet" ] || cat /proc/sys/net/ipv4/conf/all/route_localnet >"$STATE/route_localnet"
    start_node_daemon kube-proxy "$CACHE/kube-proxy" --kubeconfig="$kubeconfig" --hostname-override="$NODE" \
        --bind-address=127.0.0.1 --healthz-bind-address="127.0.0.1:$PROXY_HEALTHZ_PORT" \
        --metrics-bind-address="127.0.0.1:$PROXY_METRICS_PORT" --proxy-mode=iptables \
        --cluster-cidr="$POD_CIDR" --conntrack-max-per-core=0
    wait_for "the Node $NODE registered" "$NODE_WAIT_S" api GET "/api/v1/nodes/$NODE" >/dev/null 2>&1
    api PATCH "/api/v1/nodes/$NODE/status" \
        '{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"},{"type":"Hostname","address":"'"$NODE"'"}]}}' \
        >/dev/null
    wait_for "the Node $NODE Ready" "$NODE_WAIT_S" node_ready
}

# Why the node that runs is not the one `start` makes (nothing: it is, or none runs): Ready
# with other kubelet arguments (an older version of this script), or left half up (a daemon
# killed, the machine's processes ended without `stop`). `start` stops such a node whole and
# starts it clean, so that no old daemon is mixed with new ones.
stale_node() {
    local name
    if node_ready; then
        kubelet_args | cmp -s - "$STATE/kubelet.args" || echo "the node runs with other kubelet arguments"
        return 0
    fi
    for name in "${NODE_DAEMONS[@]}"; do
        if pid_alive "$STATE/$name.pid"; then
            echo "$name runs but the node is not Ready"
            return 0
        fi
    done
}

start_cluster() {
    local node=1
    [ "${2:-}" != --no-node ] || node=0
    if [ "$node" = 1 ]; then build_node; else install_packages && build_binaries kube-apiserver; fi
    local t0 stale
    if [ "$node" = 1 ] && stale="$(stale_node)" && [ -n "$stale" ]; then
        echo "kube-cluster: $stale; stopping the node to start it clean" >&2
        stop_cluster
    fi
    if ready && { [ "$node" = 0 ] || node_ready; }; then
        echo "kube-cluster already runs on 127.0.0.1:$PORT"
        echo "$KUBECONFIG_PATH"
        return 0
    fi
    t0="$(now_ms)"
    start >/dev/null # kube-apiserver.sh's: etcd and the API server
    [ "$node" = 0 ] || start_node
    echo "kube-cluster ready on 127.0.0.1:$PORT in $(elapsed "$t0")$([ "$node" = 1 ] && echo ", node $NODE Ready")"
    echo "$KUBECONFIG_PATH"
}

delete_pods() { # through the kubelet, so that it stops them and CNI releases their network
    ready || return 0
    local list=(python3 -c '
import json, sys
for pod in json.load(sys.stdin)["items"]:
    print(pod["metadata"]["namespace"], pod["metadata"]["name"])')
    local pods namespace name deadline=$((SECONDS + 60))
    pods="$(api GET /api/v1/pods | "${list[@]}")" || return 0
    while read -r namespace name; do
        [ -z "$name" ] || api DELETE "/api/v1/namespaces/$namespace/pods/$name" >/dev/null 2>&1 || true
    done <<<"$pods"
    # a pod object goes once the kubelet confirmed its containers stopped
    while [ -n "$pods" ] && [ "$SECONDS" -lt "$deadline" ] && pid_alive "$STATE/kubelet.pid"; do
        sleep 0.5
        pods="$(api GET /api/v1/pods | "${list[@]}")" || return 0
    done
}

# The chains the kubelet and kube-proxy make (KUBE-*, in filter, nat and mangle): the jumps
# to them from the built-in chains, then the chains. Nothing else here makes KUBE-* chains.
remove_kube_chains() {
    local table rule chain
    for table in filter nat mangle; do
        iptables -t "$table" -S | awk '$1 == "-A" && $2 !~ /^KUBE-/ && / -j KUBE-/' |
            while read -r rule; do
                eval iptables -t "$table" -D "${rule#-A }" || true
            done
        for chain in $(iptables -t "$table" -S | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do
            iptables -t "$table" -F "$chain"
        done
        for chain in $(iptables -t "$table" -S | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do
            iptables -t "$table" -X "$chain" || true
        done
    done
}

stop_cluster() {
    local rule
    delete_pods
    stop_pid "$STATE/kube-proxy.pid"
    stop_pid "$STATE/kube-scheduler.pid"
    stop_pid "$STATE/kube-controller-manager.pid"
    stop_pid "$STATE/kubelet.pid"
    # the stopped sandboxes the kubelet had not removed, and every container: the images stay
    ! pid_alive "$STATE/containerd.pid" || remove_containers
    stop_pid "$STATE/containerd.pid"
    remove_kube_chains
    for rule in "${FORWARD_RULES[@]}"; do
        # shellcheck disable=SC2086  # a rule is several words
        while iptables -D FORWARD $rule 2>/dev/null; do :; done
    done
    ! ip link show "$BRIDGE" >/dev/null 2>&1 || ip link delete "$BRIDGE"
    [ ! -f "$STATE/route_localnet" ] || cat "$STATE/route_localnet" >/proc/sys/net/ipv4/conf/all/route_localnet
    rmdir /var/log/pods /var/log/containers 2>/dev/null || true # the kubelet's, when empty
    stop # kube-apiserver.sh's: the API server and etcd
    # the kubelet's bind mount of its root, containerd's snapshots, before the state goes
    awk -v state="$STATE" -v store="$IMAGE_STORE" \
        'index($2, state) == 1 || index($2, store) == 1 { print $2 }' /proc/mounts | sort -r |
        xargs -r -n 1 umount -l
    rm -rf "$STATE"
}

on_node() { # IMAGE: the node has IMAGE as the Docker engine has it (the same config digest)
    local id ref=$1 digest
    id="$(docker image inspect -f '{{.Id}}' "$1")" || return 1
    case "${ref%%/*}" in # the reference as containerd spells it
    *.* | *:* | localhost) ;;
    *) [[ "$ref" == */* ]] && ref="docker.io/$ref" || ref="docker.io/library/$ref" ;;
    esac
    digest="$(ctr -a "$SOCK" -n k8s.io images ls "name==$ref" | awk 'NR == 2 { print $3 }')"
    [ -n "$digest" ] && ctr -a "$SOCK" -n k8s.io content get "$digest" |
        python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["config"]["digest"] != sys.argv[1])' "$id"
}

load_images() {
    [ $# -gt 0 ] || die "usage: $0 load IMAGE..."
    pid_alive "$STATE/containerd.pid" || die "the node's containerd does not run (bash $0 start)"
    local image missing=()
    for image in "$@"; do
        on_node "$image" || missing+=("$image")
    done
    [ "${#missing[@]}" = 0 ] || docker save "${missing[@]}" | ctr -a "$SOCK" -n k8s.io images import - >/dev/null
    echo "on $NODE: $* (loaded now: ${missing[*]:-none})"
}

case "${1:-}" in
start) start_cluster "$@" ;;
stop) stop_cluster ;;
load)
    shift
    load_images "$@"
    ;;
logs) ls "$STATE"/log/*.log ;;
restart)
    shift
    restart_daemon "$@"
    ;;
status)
    if node_ready; then
        echo "node $NODE Ready on 127.0.0.1:$PORT ($KUBECONFIG_PATH)"
    else
        echo "no Ready node $NODE on 127.0.0.1:$PORT"
        exit 1
    fi
    ;;
*) die "usage: $0 start [--no-node]|status|load IMAGE...|logs|restart apiserver|etcd [--down S]|stop" ;;
esac
