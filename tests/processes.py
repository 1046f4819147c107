"""Watching processes from tests: what the local scheduler and fault tests share."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import anyio.abc


def alive(pid: int) -> bool:
    """True if ``pid`` is a live process (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class LiveProcess(NamedTuple):
    """A live process seen in /proc, with one file of its /proc directory read."""

    pid: int
    ppid: int
    data: bytes  # the file asked for (e.g. cmdline or environ): NUL-separated


def live_processes(file: str) -> Iterator[LiveProcess]:
    """Every live process (zombies left out) with ``/proc/PID/<file>`` read; a process
    gone meanwhile, or not ours to read, is left out."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            data = Path(f"/proc/{entry}/{file}").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat[0] != "Z":
            yield LiveProcess(int(entry), int(stat[1]), data)


async def await_end(pid: int) -> None:
    """Return once ``pid`` exited, awaited through its pid file descriptor (no polling).

    A process that became a child of this one (the test process is a subreaper) is
    reaped; another process's child is left to its parent.
    """
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


@contextlib.asynccontextmanager
async def killed_on_exit(command: list[str], **kwargs: Any) -> AsyncIterator[anyio.abc.Process]:
    """Start ``command`` (``anyio.open_process(command, **kwargs)``); on the way out,
    SIGKILL it if it still runs (a failed check) and reap it, even when cancelled."""
    process = await anyio.open_process(command, **kwargs)
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.aclose()
