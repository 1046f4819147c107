#!/usr/bin/env bash
# The image the Kubernetes node's DDP test runs (dist.ddp -j 2x1 on two pods): Debian with
# Python and PyTorch CPU, built on this machine with nothing pulled.
#
#   bash scripts/kube-torch-image.sh   # build it once into the local Docker engine, print its
#                                      # name as the last line (an image with that tag is kept)
#
# The steps: `debootstrap --variant=minbase bookworm` from Debian's packages, with python3
# (Debian's 3.11) and python-is-python3 (dist.ddp runs `python -m torch.distributed.run` under
# bash); then this machine's pip installs torch==2.13.0 (the CPU wheel on its disk: any other
# spec downloads a CUDA build of several GB) and numpy (torch warns at every start without it)
# into the root's /usr/local/lib/python3.11/dist-packages, which Debian's python3.11 reads;
# then `docker import` with a PATH. The root is built under $CACHE and removed once imported.
# The tag names what is inside: a change of recipe takes a new tag. Put it on the node with
# `bash scripts/kube-cluster.sh load IMAGE`.
#
# Measured on a 2-core machine shared with other work: 4 min 40 s at load average 6 to 8
# (debootstrap 2 min 56 s, pip 1 min 24 s, import 19 s), 5 min 48 s at 8 to 10; the image is
# 1.1 GB; `kube-cluster.sh load` of it 59 s. With the tag present: 0.1 s.
#
# Environment: ASYNCTORCHX_KUBE_TORCH_IMAGE (default asynctorchx-test/torch:2.13.0-node),
# ASYNCTORCHX_KUBE_TORCH_CACHE (default /var/cache/asynctorchx/torch-image).
set -euo pipefail

IMAGE="${ASYNCTORCHX_KUBE_TORCH_IMAGE:-asynctorchx-test/torch:2.13.0-node}"
CACHE="${ASYNCTORCHX_KUBE_TORCH_CACHE:-/var/cache/asynctorchx/torch-image}"
SUITE=bookworm
MIRROR=http://deb.debian.org/debian
# shellcheck source=scripts/engine.sh
source "$(dirname "$0")/engine.sh"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "$IMAGE"
    exit 0
fi
need_root "debootstrap the image's root"
# the wheel on this machine's disk is for CPython 3.11, as Debian bookworm's python3 is
python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' ||
    die "python3 here is not 3.11: pip would pick wheels that the image's Python 3.11 cannot load"
command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap

mkdir -p "$CACHE"
root="$(mktemp -d "$CACHE/root.XXXXXX")"
trap 'rm -rf "$root"' EXIT
t0=$SECONDS
echo "debootstrap $SUITE (minbase, python3) into $root"
debootstrap --variant=minbase --include=python3,python-is-python3 "$SUITE" "$root" "$MIRROR" \
    >"$CACHE/debootstrap.log" 2>&1 || die "debootstrap failed (log: $CACHE/debootstrap.log)"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
echo "pip install torch==2.13.0 numpy into the root's Python"
python3 -m pip install -q --no-warn-script-location --disable-pip-version-check \
    --only-binary :all: --target "$root/usr/local/lib/python3.11/dist-packages" \
    torch==2.13.0 'numpy>=1.26'
echo "docker import $IMAGE"
tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$IMAGE" >/dev/null
echo "built $IMAGE in $((SECONDS - t0)) s ($(docker image inspect -f '{{.Size}}' "$IMAGE") bytes)"
echo "$IMAGE"
