#!/usr/bin/env bash
# Set up TorchX 0.7.0 in its own venv (benchmarks/.venv-torchx), then run every benchmark.
# Usage: bash benchmarks/run.sh [--smoke] [--trials N] [--only 1,3]
# If the TorchX venv cannot be built, the TorchX side is skipped (and said so); ours and
# the floors still run. Exits nonzero when a benchmark crashed.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
txv="$here/.venv-torchx"
if [ ! -x "$repo/.venv/bin/python" ]; then
    echo "$repo/.venv is missing: create it first (python3 -m venv .venv && .venv/bin/pip install -e '.[test]')" >&2
    exit 2
fi
if ! "$txv/bin/python" -c 'import torchx, torchx.runner' >/dev/null 2>&1; then
    echo "building $txv (torchx==0.7.0)"
    if ! { python3 -m venv "$txv" && "$txv/bin/pip" install -q 'torchx==0.7.0'; } >"$here/.torchx-setup.log" 2>&1; then
        echo "TorchX venv could not be built (see $here/.torchx-setup.log): TorchX side will be skipped"
    fi
fi
exec "$repo/.venv/bin/python" "$here/run_all.py" "$@"
