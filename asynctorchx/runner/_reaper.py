"""A group's apps that outlive the driver, cancelled by :mod:`._reap_apps` if the driver dies
(with a journal, unless another driver opens it within the group's ``adopt_within``).

Limit: scheduler parameters given to the driver's ``Runner`` in code are not the reaper's."""

from __future__ import annotations

import contextlib
import os
import sys

import anyio
import anyio.to_thread

from asynctorchx.schedulers.toolkit._lifeline import Lifeline

COMMAND = [sys.executable, "-m", "asynctorchx.runner._reap_apps"]
#: A key tied beside the handles once the group chose to cancel its apps: no hand-over then.
AT_ONCE = "--at-once"


class Reaper(Lifeline):
    """The reaper of one group, started at its first tied app."""

    def __init__(self, journal: str | None = None, adopt_within: float = 0.0) -> None:
        handover = []
        if journal is not None and adopt_within > 0:
            handover = ["--adopt", os.path.abspath(journal), str(os.getpid()), repr(adopt_within)]
        super().__init__(["run", os.getcwd(), *COMMAND, *handover])
        self._at_once = False

    def tie(self, key: str, payload: str = "") -> None:
        """As :meth:`Lifeline.tie`; a reaper started after :meth:`at_once` is told it too."""
        super().tie(key, payload)
        if self._at_once:
            super().tie(AT_ONCE)

    def at_once(self) -> None:
        """Have the driver's death from now on cancel the tied apps without a hand-over."""
        self._at_once = True
        if self.pid is not None:
            super().tie(AT_ONCE)

    async def close(self) -> None:
        """Release the reaper and wait for it to exit (shielded)."""
        pid = self.release()
        if pid is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(ChildProcessError):
                await anyio.to_thread.run_sync(os.waitpid, pid, 0)
