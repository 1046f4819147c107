"""``run`` names its calling context, ``TORCHX_CONTEXT_NAME``, for what it runs, as
torchx-nightly's ``torchx run`` does (side by side)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nightly import run_nightly

LIMIT = 60  # seconds: a safety bound, never a timing guess

#: a replica that prints the variable, bracketed so an empty value shows
ECHO = ["-s", "local_cwd", "utils.sh", "sh", "-c", "echo ctx=[${TORCHX_CONTEXT_NAME-unset}]"]

#: torchx-nightly's `torchx run`, in its venv, with the given environment
NIGHTLY = """
import json, os, subprocess, sys
data = json.load(sys.stdin)
torchx = os.path.join(os.path.dirname(sys.executable), "torchx")
done = subprocess.run([torchx, "run", *data["args"]], env=data["env"], cwd=data["cwd"],
                      capture_output=True, text=True, timeout=60)
print(json.dumps([done.returncode, done.stderr]))
"""


def _seen(stderr: str) -> list[str]:
    return [line.split("ctx=", 1)[1] for line in stderr.splitlines() if "ctx=[" in line]


@pytest.mark.parametrize("outer", [None, "", "pipeline-a"])
def test_run_sets_the_context_name_unless_set_as_nightly(outer: str | None, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    env["HOME"] = str(home)
    if outer is not None:
        env["TORCHX_CONTEXT_NAME"] = outer
    ours = subprocess.run(
        [sys.executable, "-m", "asynctorchx", "run", *ECHO],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )
    assert ours.returncode == 0, ours.stderr
    expected = "cli_run" if outer is None else outer
    assert _seen(ours.stderr) == [f"[{expected}]"]
    code, stderr = run_nightly(NIGHTLY, {"args": ECHO, "env": env, "cwd": str(tmp_path)})
    assert code == 0, stderr
    assert _seen(stderr) == _seen(ours.stderr)
