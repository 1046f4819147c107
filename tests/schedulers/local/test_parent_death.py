"""The watchdog that ties replicas to their host: its protocol, a fork, a restart."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap

import anyio
import anyio.abc
import pytest

from asynctorchx.schedulers.local._parent_death import WATCHDOG_PROGRAM
from tests.processes import await_end, killed_on_exit

LIMIT = 30  # seconds

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process semantics")


def sleeper() -> contextlib.AbstractAsyncContextManager[anyio.abc.Process]:
    """A ``sleep 600`` in a session of its own, killed on the way out."""
    return killed_on_exit(["sleep", "600"], start_new_session=True)


async def read_until_ready(host: anyio.abc.Process) -> bytes:
    """What ``host`` printed up to and including its ``ready`` line."""
    assert host.stdout is not None
    output = b""
    with anyio.fail_after(LIMIT):
        async for chunk in host.stdout:
            output += chunk
            if output.endswith(b"ready\n"):
                break
    return output


async def test_the_watchdog_kills_the_groups_left_at_end_of_file() -> None:
    async with sleeper() as tied, sleeper() as untied:
        watchdog = await anyio.open_process(
            [sys.executable, "-I", "-S", "-c", WATCHDOG_PROGRAM], stdin=subprocess.PIPE
        )
        async with watchdog:
            assert watchdog.stdin is not None
            await watchdog.stdin.send(f"+{tied.pid}\n+{untied.pid}\n-{untied.pid}\n".encode())
            await watchdog.stdin.aclose()  # what the host's death does
            with anyio.fail_after(LIMIT):
                assert await watchdog.wait() == 0
                assert await tied.wait() == -signal.SIGKILL
        assert untied.returncode is None


#: A host that ties one ``sleep`` to its watchdog, then forks a child that holds on
#: (it reads its stdin), or kills its watchdog and ties a second ``sleep``; it prints
#: the ``pid`` of each ``sleep``, then ``ready``.
HOST = textwrap.dedent(
    """
    import os, subprocess
    from asynctorchx.schedulers.local import _parent_death

    def tied():
        process = subprocess.Popen(["sleep", "600"], start_new_session=True)
        _parent_death.tie(process.pid)
        print("pid", process.pid, flush=True)

    tied()
    if {case!r} == "fork":
        if os.fork() == 0:
            os.read(0, 1)  # until the test lets go
            os._exit(0)
    else:
        first = _parent_death.watchdog_pid()
        os.kill(first, 9)
        os.waitpid(first, 0)
        tied()  # finds the pipe broken: a new watchdog gets both groups
        assert _parent_death.watchdog_pid() not in (None, first)
    print("ready", flush=True)
    os.read(0, 1)
    """
)


@pytest.mark.parametrize("case", ["fork", "restart"])
async def test_the_replicas_of_a_sigkilled_host_end(case: str) -> None:
    # "fork": a child forked from the host does not keep the watchdog waiting;
    # "restart": a watchdog killed while its host lives is replaced, told every group
    host = await anyio.open_process(
        [sys.executable, "-c", HOST.format(case=case)],
        stdin=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    async with host:
        output = await read_until_ready(host)
        pids = [int(line.split()[1]) for line in output.decode().splitlines()[:-1]]
        assert len(pids) == (1 if case == "fork" else 2)
        host.kill()
        await host.wait()
        try:
            with anyio.fail_after(LIMIT):
                for pid in pids:
                    await await_end(pid)
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        # the forked child, still alive, reads the host's stdin: closing it ends it


#: A host that ties one ``sleep``, then ties and unties 20,000 groups that cannot exist
#: (above Linux's largest pid) in one burst, faster than the watchdog reads: ~180 KB of
#: lines, more than a default pipe holds; it prints the ``sleep``'s pid, how many
#: warnings the watchdog's module logged, then ``ready``.
BURST_HOST = textwrap.dedent(
    """
    import logging, os, subprocess
    from asynctorchx.schedulers.local import _parent_death

    warnings = []
    handler = logging.Handler()
    handler.emit = warnings.append
    logging.getLogger(_parent_death.__name__).addHandler(handler)
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    _parent_death.tie(process.pid)
    for pgid in range(2**22 + 1, 2**22 + 20_001):
        _parent_death.tie(pgid)
        _parent_death.untie(pgid)
    print("pid", process.pid, flush=True)
    print("warnings", len(warnings), flush=True)
    print("ready", flush=True)
    os.read(0, 1)
    """
)


async def test_a_burst_of_starts_is_tied_whole() -> None:
    # the watchdog reads at most every READ_INTERVAL: its pipe holds a burst meanwhile
    host = await anyio.open_process(
        [sys.executable, "-c", BURST_HOST], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    async with host:
        output = await read_until_ready(host)
        lines = output.decode().splitlines()
        pid = int(lines[0].split()[1])
        host.kill()
        await host.wait()
        try:
            with anyio.fail_after(LIMIT):
                await await_end(pid)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert lines[1] == "warnings 0"
