"""End every local replica when this Python process gets SIGTERM, then die of it.

TorchX's ``torchx.schedulers.local_scheduler`` installs a SIGTERM/SIGINT handler that
raises in the main thread so its replicas can be cleaned up. Here the handler is a
task: :func:`terminate_replicas_on_sigterm` is started in a task group by its owner (the
first ``LocalScheduler`` entered in the main thread while SIGTERM has its default
handler, see :func:`sigterm_is_default`), and stopped by cancelling the scope it
reports as started.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from asynctorchx.schedulers.local._process_groups import ProcessGroups


def sigterm_is_default() -> bool:
    """True in the main thread while SIGTERM has its default handler.

    Only then may a handler be installed: a program that handles SIGTERM itself keeps
    its own, and only the main thread can install one.
    """
    return threading.current_thread() is threading.main_thread() and signal.getsignal(
        signal.SIGTERM
    ) in (signal.SIG_DFL, None)


async def terminate_replicas_on_sigterm(
    groups: ProcessGroups,
    stop_timeout: Callable[[], float],
    terminate_apps: Callable[[], Awaitable[None]],
    *,
    task_status: anyio.abc.TaskStatus[anyio.CancelScope] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """On SIGTERM: terminate every replica, then die of SIGTERM as without the handler.

    SIGTERM goes to every group in ``groups``; ``terminate_apps`` (cancel every app and
    await its end) gets ``stop_timeout()`` seconds; what is left is SIGKILLed; then the
    default handler is restored and SIGTERM sent to this process again.

    Args:
        groups: the process groups to end.
        stop_timeout: returns the seconds between SIGTERM and SIGKILL.
        terminate_apps: cancels every app and awaits its end.
        task_status: reports the cancel scope that uninstalls the handler, once it is
            installed (``await task_group.start(terminate_replicas_on_sigterm, ...)``).
    """
    with anyio.CancelScope() as scope, anyio.open_signal_receiver(signal.SIGTERM) as signals:
        task_status.started(scope)
        async for _ in signals:
            timeout = stop_timeout()
            groups.signal_all(signal.SIGTERM)
            with anyio.move_on_after(timeout):
                await terminate_apps()
            groups.signal_all(signal.SIGKILL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
