"""A group's apps that outlive the driver, cancelled by :mod:`._reap_apps` if the driver dies.

Limit: scheduler parameters given to the driver's ``Runner`` in code are not the reaper's."""

from __future__ import annotations

import contextlib
import os
import sys

import anyio
import anyio.to_thread

from asynctorchx.schedulers.toolkit._lifeline import Lifeline
from asynctorchx.specs.api import AppHandle

COMMAND = [sys.executable, "-m", "asynctorchx.runner._reap_apps"]


class Reaper:
    """The reaper of one group, started at its first tied app."""

    def __init__(self) -> None:
        self._lifeline = Lifeline(["run", os.getcwd(), *COMMAND])

    async def tie(self, handle: AppHandle) -> None:
        self._lifeline.tie(handle)

    async def untie(self, handle: AppHandle) -> None:
        self._lifeline.untie(handle)

    async def close(self) -> None:
        """Release the reaper and wait for it to exit (shielded)."""
        pid = self._lifeline.release()
        if pid is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(ChildProcessError):
                await anyio.to_thread.run_sync(os.waitpid, pid, 0)
