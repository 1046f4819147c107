"""Termination signals, owned explicitly: close what runs, then die of the signal.

Unlike TorchX's local scheduler, entering a scheduler installs no handler: the owner asks.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Protocol

import anyio
import anyio.abc
import anyio.lowlevel

from asynctorchx.schedulers.toolkit import Notifier, background_tasks, gather

#: The signals an owner turns into a clean shutdown; SIGINT's ``KeyboardInterrupt``
#: unwinds every ``async with`` block anyway.
TERMINATION_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)


class SupportsClose(Protocol):
    """Anything with an idempotent ``async close()``: a Runner or a Scheduler."""

    def close(self) -> Awaitable[None]: ...


class _Hub:
    """The one signal receiver of an event loop and the objects it closes."""

    def __init__(self) -> None:
        self.closeables: dict[object, SupportsClose] = {}  # one key per open block
        self.hosted = False
        self.changed = Notifier()

    async def serve(
        self, key: object, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Host the receiver whenever no other block does, until ``key`` leaves."""
        while key in self.closeables:
            event = self.changed.event
            if self.hosted:
                task_status.started()
                task_status = anyio.TASK_STATUS_IGNORED
                await event.wait()
                continue
            self.hosted = True
            try:
                with anyio.open_signal_receiver(*_takeable_signals()) as received:
                    task_status.started()
                    task_status = anyio.TASK_STATUS_IGNORED
                    async for signum in received:
                        await self._terminate(signum)
            finally:
                self.hosted = False
                self.changed.notify()

    async def _terminate(self, signum: int) -> None:
        closeables = list(self.closeables.values())
        with anyio.CancelScope(shield=True):
            await gather(closeable.close for closeable in closeables)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        await anyio.lowlevel.checkpoint()


_HUB: anyio.lowlevel.RunVar[_Hub] = anyio.lowlevel.RunVar("asynctorchx_signal_hub")


def _hub() -> _Hub:
    hub = _HUB.get(None)
    if hub is None:
        hub = _Hub()
        _HUB.set(hub)
    return hub


def _takeable_signals() -> list[signal.Signals]:
    """The termination signals not ignored (``nohup``): the user asked to survive those."""
    return [signum for signum in TERMINATION_SIGNALS if signal.getsignal(signum) != signal.SIG_IGN]


def can_own_signals() -> bool:
    """Whether a Runner with ``handle_signals=None`` takes the termination signals here.

    True in the main thread when SIGTERM has its default action or this loop serves it
    already; False when the program handles SIGTERM itself (a web server).
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    hub = _HUB.get(None)
    if hub is not None and hub.hosted:
        return True
    return signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None)


@asynccontextmanager
async def terminate_on_signals(closeable: SupportsClose) -> AsyncIterator[None]:
    """While the block runs, SIGTERM or SIGHUP closes ``closeable``, then ends the process.

    One receiver per event loop closes every open block's object concurrently, then the
    process dies of the signal as it would have.

    Args:
        closeable: what to close on the signal, e.g. a Runner or an entered scheduler.

    Raises:
        RuntimeError: not called in the main thread (only it can receive signals).
        BaseException: what the block raised, as itself (never in an ExceptionGroup).
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("terminate_on_signals needs the main thread: only it gets signals")
    hub = _hub()
    key = object()
    hub.closeables[key] = closeable
    try:
        async with background_tasks() as task_group:
            await task_group.start(hub.serve, key)
            yield
    finally:
        del hub.closeables[key]
