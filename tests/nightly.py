"""Run a program in torchx-nightly's own venv: the side-by-side tests' reference.

The venv is ``$ASYNCTORCHX_TORCHX_NIGHTLY_VENV``, else
``/var/cache/asynctorchx/venv-torchx-nightly`` (``.ci/run`` builds it there).
Without it a test skips with the command that builds it; with
``ASYNCTORCHX_REQUIRE_TORCHX_NIGHTLY=1`` (set by ``.ci/run``) it fails instead.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

VENV = Path(
    os.environ.get("ASYNCTORCHX_TORCHX_NIGHTLY_VENV", "/var/cache/asynctorchx/venv-torchx-nightly")
)
BUILD_VENV = (
    f"python3 -m venv {VENV} && {VENV}/bin/pip install torchx-nightly==2026.10.26"
    " (or set ASYNCTORCHX_TORCHX_NIGHTLY_VENV to such a venv)"
)


def run_nightly(program: str, data: Any = None, *, env: dict[str, str] | None = None) -> Any:
    """Run ``program`` in torchx-nightly's venv and return the JSON it prints.

    Args:
        program: Python source; it reads ``data`` as JSON on stdin and prints JSON.
        data: JSON-able input.
        env: variables added to a copy of this process's environment.
    """
    python = VENV / "bin" / "python"
    if not python.exists():
        if os.environ.get("ASYNCTORCHX_REQUIRE_TORCHX_NIGHTLY"):
            pytest.fail(f"no torchx-nightly venv at {VENV}: {BUILD_VENV}")
        pytest.skip(f"no torchx-nightly venv at {VENV}: {BUILD_VENV}")
    done = subprocess.run(
        [str(python), "-W", "ignore", "-c", program],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
