"""``run``'s status line: shown on a terminal while the app is quiet, gone when it prints
or ends; never drawn when standard error is not a terminal."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
from pathlib import Path

from asynctorchx.cli._status_line import QUIET_S, describe
from asynctorchx.specs.api import AppState, AppStatus, ReplicaStatus, RoleStatus

LIMIT = 60  # seconds: a safety bound, never a timing guess


def test_the_line_says_state_replicas_pending_reason_and_elapsed_time() -> None:
    states = [AppState.RUNNING, AppState.PENDING, AppState.PENDING]
    replicas = [ReplicaStatus(i, state, "train", "node") for i, state in enumerate(states)]
    pending = AppStatus(AppState.PENDING, msg="Resources", roles=[RoleStatus("train", replicas)])
    assert describe(pending, 3725.9) == (
        "asynctorchx: PENDING, 1/3 replicas running, Resources, 1:02:05"
    )
    running = AppStatus(AppState.RUNNING, msg="stale", roles=[RoleStatus("train", replicas)])
    assert describe(running, 59) == "asynctorchx: RUNNING, 1/3 replicas running, 0:00:59"
    assert describe(None, 0) == "asynctorchx: the scheduler does not know the app, 0:00:00"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TORCHX")}
    return {**env, "HOME": str(tmp_path), "TERM": "xterm", "COLUMNS": "200"}


def _read_until(master: int, wanted: str | None, seen: bytearray) -> None:
    """Read the terminal into ``seen`` until ``wanted`` is in it (``None``: its end)."""
    while wanted is None or wanted.encode() not in seen:
        ready, _, _ = select.select([master], [], [], LIMIT)
        assert ready, f"nothing for {LIMIT} s; so far: {bytes(seen)!r}"
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other end closed
            chunk = b""
        if not chunk:
            assert wanted is None, f"ended before {wanted!r}: {bytes(seen)!r}"
            return
        seen += chunk


def test_a_quiet_app_shows_its_status_until_it_prints(tmp_path: Path) -> None:
    go = tmp_path / "go"
    os.mkfifo(go)
    script = "import sys; print('started', flush=True); open(sys.argv[1]).read(); print('done')"
    argv = ["run", "-s", "local_cwd", "utils.sh", sys.executable, "-c", script, str(go)]
    master, terminal = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "asynctorchx", *argv],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=terminal,
    ) as run:
        os.close(terminal)
        seen = bytearray()
        _read_until(master, "RUNNING, 1/1 replicas running, 0:00:0", seen)
        drawn = len(seen)
        go.write_text("go")  # the app goes on and prints
        _read_until(master, None, seen)
        os.close(master)
        assert run.wait(timeout=LIMIT) == 0
    after = bytes(seen[drawn:])
    assert after.index(b"\x1b[2K") < after.index(b"done")  # erased before the output
    assert b"replicas running" not in after[after.index(b"done") :]


def test_ctrl_c_erases_the_line_and_dies_of_sigint(tmp_path: Path) -> None:
    """Ctrl-C while the line shows: it is erased (the cursor shown again) before the
    interrupt's notes, and ``run`` still cancels the app and dies of the signal."""
    never = tmp_path / "never"
    os.mkfifo(never)  # never written: the app waits until it is cancelled
    script = "import sys; open(sys.argv[1]).read()"
    argv = ["run", "-s", "local_cwd", "utils.sh", sys.executable, "-c", script, str(never)]
    master, terminal = pty.openpty()
    with subprocess.Popen(
        [sys.executable, "-m", "asynctorchx", *argv],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=terminal,
    ) as run:
        os.close(terminal)
        seen = bytearray()
        _read_until(master, "replicas running", seen)
        drawn = len(seen)
        run.send_signal(signal.SIGINT)
        _read_until(master, None, seen)
        os.close(master)
        assert run.wait(timeout=LIMIT) == -signal.SIGINT  # dies of it: a shell's 130
    after = bytes(seen[drawn:])
    interrupted = after.index(b"interrupted, cancelling the app")
    assert after.rindex(b"\x1b[2K", 0, interrupted) > after.rfind(
        b"replicas running", 0, interrupted
    )
    assert b"\x1b[?25h" in after[:interrupted]
    assert b"replicas running" not in after[interrupted:]
    assert b"CANCELLED" in after[interrupted:]


def test_no_status_line_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    quiet = f"import time; time.sleep({QUIET_S + 1.5})"  # longer than the line waits to show
    done = subprocess.run(
        [sys.executable, "-m", "asynctorchx", "run", "utils.sh", sys.executable, "-c", quiet],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert b"replicas running" not in done.stderr
    assert b"\x1b[" not in done.stderr
