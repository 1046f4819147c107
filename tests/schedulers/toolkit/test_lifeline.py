"""The lifeline: its protocol, its kills, its command, a restart, as a parent runs it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynctorchx.schedulers.toolkit import _lifeline
from asynctorchx.schedulers.toolkit._lifeline import Lifeline
from tests.processes import alive

LIMIT = 30  # seconds

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process semantics")

VARIABLE = b"WATCHDOG_TEST_TOKEN"


@contextlib.contextmanager
def started(command: list[str], **kwargs: Any) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` started in a session of its own; SIGKILLed and reaped on the way out."""
    process = subprocess.Popen(command, start_new_session=True, **kwargs)
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()


def pipe_holding(data: bytes) -> int:
    """The read end of a pipe that holds ``data`` and then ends (its write end closed)."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data)
    os.close(write_fd)
    return read_fd


def test_the_lines_tie_and_untie_keys_whatever_the_reads_cut() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"+10 ab\n+11 \n+1")  # a line cut by the end of a write
    os.write(write_fd, b"2 cd\n-11\n-99\n")  # untying a key never tied is fine
    os.close(write_fd)
    try:
        assert _lifeline.read_tied(read_fd, 0) == {b"10": b"ab", b"12": b"cd"}
    finally:
        os.close(read_fd)


def test_a_normal_exit_leaves_nothing_tied() -> None:
    read_fd = pipe_holding(b"+10 ab\n.\n")
    try:
        assert _lifeline.read_tied(read_fd, 0) == {}
    finally:
        os.close(read_fd)


def test_a_key_that_is_not_a_process_group_is_refused_by_kill() -> None:
    read_fd = pipe_holding(b"+not-a-pid\n")
    try:
        with pytest.raises(ValueError, match="not-a-pid"):
            _lifeline.act(_lifeline.read_tied(read_fd, 0), ["kill", VARIABLE.decode()])
    finally:
        os.close(read_fd)


def watch(read_fd: int) -> None:
    """What the program does with ``kill``, in this process."""
    _lifeline.act(_lifeline.read_tied(read_fd, 0), ["kill", VARIABLE.decode()])


def test_the_groups_still_tied_at_end_of_file_are_killed() -> None:
    with started(["sleep", "600"]) as tied, started(["sleep", "600"]) as untied:
        read_fd = pipe_holding(f"+{tied.pid} \n+{untied.pid} \n-{untied.pid}\n".encode())
        try:
            watch(read_fd)
        finally:
            os.close(read_fd)
        assert tied.wait(timeout=30) == -signal.SIGKILL
        assert untied.poll() is None


#: A replica whose child leaves its process group (``setpgid``), staying in its
#: session; it prints the child's pid.
LEAVES_ITS_GROUP = (
    f"{sys.executable} -c 'import os, time; os.setpgid(0, 0);"
    " print(os.getpid(), flush=True); time.sleep(600)' & exec sleep 600"
)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the sweep needs pidfd_open")
def test_what_a_tied_replica_left_behind_is_killed_and_nothing_else() -> None:
    token_env = {**os.environ, VARIABLE.decode(): "feed"}
    with (
        started(["sh", "-c", LEAVES_ITS_GROUP], stdout=subprocess.PIPE) as replica,
        started(["sleep", "600"], env=token_env) as carries_the_token,  # a session of its own
        started(["sleep", "600"]) as stranger,
    ):
        assert replica.stdout is not None
        left_its_group = int(replica.stdout.readline())
        try:
            read_fd = pipe_holding(f"+{replica.pid} feed\n".encode())
            try:
                watch(read_fd)
            finally:
                os.close(read_fd)
            # watch returns once each process it killed has exited
            assert not alive(left_its_group)
            assert carries_the_token.wait(timeout=30) == -signal.SIGKILL
            assert replica.wait(timeout=30) == -signal.SIGKILL
            assert stranger.poll() is None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(left_its_group, signal.SIGKILL)


async def test_the_program_as_the_parent_runs_it_ends_at_end_of_file() -> None:
    with started(["sleep", "600"]) as tied:
        command = [sys.executable, "-I", "-S", _lifeline.PROGRAM]
        watchdog = await anyio.open_process(
            [*command, "0", "kill", VARIABLE.decode()],
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        async with watchdog:
            assert watchdog.stdin is not None
            await watchdog.stdin.send(f"+{tied.pid} \n".encode())
            await watchdog.stdin.aclose()  # what the host's death does
            with anyio.fail_after(30):
                assert await watchdog.wait() == 0
        assert tied.wait(timeout=30) == -signal.SIGKILL


def test_run_runs_its_command_with_the_keys_still_tied_in_its_directory(
    tmp_path: Path,
) -> None:
    read_fd = pipe_holding(b"+a \n+b \n+c \n-b\n")
    try:
        command = ["sh", "-c", 'echo "$@" > ran', "sh"]
        _lifeline.act(_lifeline.read_tied(read_fd, 0), ["run", str(tmp_path), *command])
    finally:
        os.close(read_fd)
    assert (tmp_path / "ran").read_text() == "a c\n"


async def test_a_released_lifeline_runs_nothing(tmp_path: Path) -> None:
    lifeline = Lifeline(["run", str(tmp_path), "touch", "ran"])
    lifeline.tie("x")
    pid = lifeline.release()
    assert pid is not None
    assert os.waitpid(pid, 0)[1] == 0
    assert not (tmp_path / "ran").exists()
    assert lifeline.release() is None


async def test_a_program_that_dies_as_it_starts_is_started_again_at_the_next_tie(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with started(["sleep", "600"]) as first, started(["sleep", "600"]) as second:
        lifeline = Lifeline(["kill", VARIABLE.decode()])
        start = lifeline._start

        def start_and_die() -> bool:  # a program that is gone before it is told anything
            with monkeypatch.context() as patch:
                patch.setattr(_lifeline, "PROGRAM", os.devnull)  # an empty program
                assert start()
            assert lifeline.pid is not None
            os.waitpid(lifeline.pid, 0)
            return True

        monkeypatch.setattr(lifeline, "_start", start_and_die)
        lifeline.tie(str(first.pid))  # both the first and the restart die: no error
        monkeypatch.setattr(lifeline, "_start", start)
        lifeline.tie(str(second.pid))  # a live program, told every tied key
        assert lifeline._fd is not None
        os.close(lifeline._fd)  # what the parent's death does
        assert first.wait(timeout=LIMIT) == -signal.SIGKILL
        assert second.wait(timeout=LIMIT) == -signal.SIGKILL
        assert lifeline.pid is not None
        assert os.waitpid(lifeline.pid, 0)[1] == 0  # it exited at end of file
