"""Fault cases of the local schedulers against real processes: the host dies or is
signalled, replicas leave daemons behind. Each case counts the processes left.

A host program runs in a subprocess and prints the pids of what its replicas started;
the test then hurts the host and awaits each of those processes' end through a pid file
descriptor (no sleep guesses at timing; ``LIMIT`` is only a deadline for a hang).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap

import anyio
import pytest

LIMIT = 30  # seconds

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process semantics")


def alive(pid: int) -> bool:
    """True if ``pid`` is a live process (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def await_end(pid: int) -> None:
    """Return once ``pid`` exited (reaping it if it became a child of this process)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


async def host_pids(process: anyio.abc.Process) -> list[int]:
    """Read ``pid N`` lines from the host until its ``ready`` line; return the pids."""
    assert process.stdout is not None
    output = b""
    async for chunk in process.stdout:
        output += chunk
        if output.endswith(b"ready\n"):
            break
    return [int(line.split()[1]) for line in output.decode().splitlines() if line != "ready"]


async def expect_all_end(pids: list[int]) -> None:
    """Await the end of every pid (killing the survivors when the deadline passes)."""
    try:
        with anyio.fail_after(LIMIT):
            for pid in pids:
                await await_end(pid)
    finally:
        survivors = [pid for pid in pids if alive(pid)]
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
    assert survivors == []


SIGKILLED_HOST = textwrap.dedent(
    """
    import anyio
    from asynctorchx.schedulers.local import create_cwd_scheduler
    from asynctorchx.specs.api import AppDef, Role

    async def main():
        async with create_cwd_scheduler("host") as scheduler:
            role = Role("r", "x", entrypoint="sh", args=["-c", "echo pid $$$$; exec sleep 600"],
                        num_replicas=3)
            app_id = await scheduler.submit(AppDef("host", [role]), {})
            for k in range(3):
                async for line in scheduler.log_iter(app_id, "r", k, should_tail=True):
                    print(line, end="", flush=True)
                    break
            print("ready", flush=True)
            await scheduler.wait(app_id)

    anyio.run(main)
    """
)


async def test_replicas_end_when_the_host_is_sigkilled() -> None:
    # nothing in the host runs on SIGKILL: the kernel must end the replicas
    async with await anyio.open_process(
        [sys.executable, "-c", SIGKILLED_HOST], stderr=subprocess.DEVNULL
    ) as process:
        with anyio.fail_after(LIMIT):
            pids = await host_pids(process)
        assert len(pids) == 3
        assert all(alive(pid) for pid in pids)
        process.kill()
        await process.wait()
    await expect_all_end(pids)
