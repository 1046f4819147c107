"""No orphan after a crash: a group's apps that outlive the driver, cancelled if it dies.

An :class:`~asynctorchx.runner.AppGroup` stops its apps when its block is left, even by
an exception, a cancellation or a signal the runner handles; a driver killed outright
(``SIGKILL``, the OOM killer, a lost login node) runs none of that. So at a group's first
app whose scheduler keeps it beyond the driver (``apps_live_in_process`` false:
``local_docker``, ``slurm``, ``kubernetes``), the group starts the reaper program
(:mod:`._reaper_program`, the same idea as the local scheduler's parent-death watchdog):
a process of its own session, ignoring the terminal's signals, whose standard input is a
pipe from the driver. The group writes each such app to it as it is submitted and again
once it is terminal; when the group's block is left the group says so and waits for the
reaper to exit. If instead the pipe reaches its end with apps still tied (the driver is
gone: the kernel closed its end), the reaper runs :mod:`._reap_apps`, which cancels
them through a runner made as the CLI makes one: the driver's environment and working
directory, its ``.torchxconfig``, the session of each handle. It holds nothing the
driver's CLI would not.

Limits: scheduler parameters given to the driver's ``Runner`` in code (not through the
environment or ``.torchxconfig``) are not the reaper's; apps started outside a group keep
TorchX's detached behaviour.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import anyio
from anyio.abc import Process

from asynctorchx.runner import _reaper_program
from asynctorchx.specs.api import AppHandle

logger = logging.getLogger(__name__)

PROGRAM = _reaper_program.__file__


class Reaper:
    """The reaper process of one group: started at its first tied app, ended with the group."""

    def __init__(self) -> None:
        self._process: Process | None = None
        self._lock = anyio.Lock()  # one writer at a time, one start

    async def _send(self, line: str) -> None:
        assert self._process is not None
        assert self._process.stdin is not None
        await self._process.stdin.send(line.encode())

    async def tie(self, handle: AppHandle) -> None:
        """Have ``handle`` cancelled if the driver dies before :meth:`untie` or :meth:`close`.

        Raises:
            OSError: the reaper program could not be started.
        """
        async with self._lock:
            if self._process is None:
                self._process = await anyio.open_process(
                    [sys.executable, "-I", PROGRAM, sys.executable, os.getcwd()],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            await self._send(f"+{handle}\n")

    async def untie(self, handle: AppHandle) -> None:
        """``handle`` is terminal: nothing to cancel for it any more."""
        async with self._lock:
            if self._process is not None:
                await self._send(f"-{handle}\n")

    async def close(self) -> None:
        """Tell the reaper the driver leaves normally, and wait for it to exit (shielded)."""
        with anyio.CancelScope(shield=True):
            async with self._lock:
                process, self._process = self._process, None
                if process is None:
                    return
                assert process.stdin is not None
                try:
                    await process.stdin.send(b".\n")
                    await process.stdin.aclose()
                except (OSError, anyio.BrokenResourceError):  # it died: nothing to tell it
                    logger.warning("the reaper of an app group exited early")
                await process.wait()
