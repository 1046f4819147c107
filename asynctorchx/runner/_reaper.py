"""No orphan after a crash: a group's apps that outlive the driver, cancelled if it dies.

A driver killed outright (``SIGKILL``, the OOM killer, a lost login node) runs none of
an :class:`~asynctorchx.runner.AppGroup`'s stop. So a group ties each app whose
scheduler keeps it beyond the driver (``apps_live_in_process`` false) to a
:class:`~asynctorchx.schedulers.toolkit._lifeline.Lifeline` that, if the driver dies
first, runs :mod:`._reap_apps` on the apps still tied: it cancels them through a runner
made as the CLI makes one (the driver's environment, working directory and
``.torchxconfig``). Limit: scheduler parameters given to the driver's ``Runner`` in code
are not the reaper's.
"""

from __future__ import annotations

import contextlib
import os
import sys

import anyio
import anyio.to_thread

from asynctorchx.schedulers.toolkit._lifeline import Lifeline
from asynctorchx.specs.api import AppHandle

#: The reaper's command, before the handles it cancels.
COMMAND = [sys.executable, "-m", "asynctorchx.runner._reap_apps"]


class Reaper:
    """The reaper of one group: started at its first tied app, released with the group."""

    def __init__(self) -> None:
        self._lifeline = Lifeline(["run", os.getcwd(), *COMMAND])

    async def tie(self, handle: AppHandle) -> None:
        """Have ``handle`` cancelled if the driver dies before :meth:`untie` or :meth:`close`."""
        self._lifeline.tie(handle)

    async def untie(self, handle: AppHandle) -> None:
        """``handle`` is terminal: nothing to cancel for it any more."""
        self._lifeline.untie(handle)

    async def close(self) -> None:
        """Tell the reaper the driver leaves normally, and wait for it to exit (shielded)."""
        pid = self._lifeline.release()
        if pid is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(ChildProcessError):
                await anyio.to_thread.run_sync(os.waitpid, pid, 0)
