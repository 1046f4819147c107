"""A group's apps that outlive the driver, cancelled by :mod:`._reap_apps` if the driver dies.

Limit: scheduler parameters given to the driver's ``Runner`` in code are not the reaper's."""

from __future__ import annotations

import contextlib
import os
import sys

import anyio
import anyio.to_thread

from asynctorchx.schedulers.toolkit._lifeline import Lifeline

COMMAND = [sys.executable, "-m", "asynctorchx.runner._reap_apps"]


class Reaper(Lifeline):
    """The reaper of one group, started at its first tied app."""

    def __init__(self) -> None:
        super().__init__(["run", os.getcwd(), *COMMAND])

    async def close(self) -> None:
        """Release the reaper and wait for it to exit (shielded)."""
        pid = self.release()
        if pid is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(ChildProcessError):
                await anyio.to_thread.run_sync(os.waitpid, pid, 0)
