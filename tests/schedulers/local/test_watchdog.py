"""The watchdog program, in this process and as the host runs it: its protocol, its kills."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from asynctorchx.schedulers.local import _parent_death, _watchdog
from asynctorchx.schedulers.local._subreaper import TOKEN_VARIABLE
from tests.processes import alive

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


def test_the_lines_tie_and_untie_groups_whatever_the_reads_cut() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"+10 ab\n+11 \n+1")  # a line cut by the end of a write
    os.write(write_fd, b"2 cd\n-11\n-99\n")  # untying a group never tied is fine
    os.close(write_fd)
    try:
        assert _watchdog.read_groups(read_fd, 0) == {10: b"ab", 12: b"cd"}
    finally:
        os.close(read_fd)


def test_a_line_that_is_not_the_hosts_is_refused() -> None:
    read_fd = pipe_holding(b"+not-a-pid\n")
    try:
        with pytest.raises(ValueError, match="not-a-pid"):
            _watchdog.read_groups(read_fd, 0)
    finally:
        os.close(read_fd)


def test_the_groups_still_tied_at_end_of_file_are_killed() -> None:
    with started(["sleep", "600"]) as tied, started(["sleep", "600"]) as untied:
        read_fd = pipe_holding(f"+{tied.pid} \n+{untied.pid} \n-{untied.pid}\n".encode())
        try:
            _watchdog.watch(read_fd, 0, VARIABLE)
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
                _watchdog.watch(read_fd, 0, VARIABLE)
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


async def test_the_program_as_the_host_runs_it_ends_at_end_of_file() -> None:
    with started(["sleep", "600"]) as tied:
        command = [sys.executable, "-I", "-S", _parent_death.PROGRAM]
        watchdog = await anyio.open_process(
            [*command, "0", TOKEN_VARIABLE], stdin=subprocess.PIPE, start_new_session=True
        )
        async with watchdog:
            assert watchdog.stdin is not None
            await watchdog.stdin.send(f"+{tied.pid} \n".encode())
            await watchdog.stdin.aclose()  # what the host's death does
            with anyio.fail_after(30):
                assert await watchdog.wait() == 0
        assert tied.wait(timeout=30) == -signal.SIGKILL
