"""Structured concurrency helpers of ``local_docker``: run engine calls at once in a task group.

The first error cancels the other calls and is raised as itself, never wrapped in an
``ExceptionGroup``, so callers catch the same errors as from one call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio


async def _concurrently(
    calls: Iterable[Callable[[], Awaitable[Any]]], *, until_first_returns: bool
) -> None:
    """Run ``calls`` concurrently in a task group; on the first error cancel the rest.

    With ``until_first_returns`` the first call to return also cancels the others (a
    race): only cancel-safe awaits belong there (``StreamBody.fill``, a wait endpoint),
    since the losers are cancelled and must lose nothing.

    Args:
        calls: the calls, each awaited once in its own task.
        until_first_returns: the first call to return cancels the others.

    Raises:
        Exception: the first error of a call, as itself (never in an ExceptionGroup).
    """
    errors: list[Exception] = []
    async with anyio.create_task_group() as tg:

        async def run(call: Callable[[], Awaitable[Any]]) -> None:
            try:
                await call()
            except Exception as err:
                errors.append(err)
                tg.cancel_scope.cancel()
            else:
                if until_first_returns:
                    tg.cancel_scope.cancel()

        for call in calls:
            tg.start_soon(run, call)
    if errors:
        raise errors[0]


async def gather(calls: Iterable[Callable[[], Awaitable[Any]]]) -> None:
    """Run ``calls`` concurrently to the end; the first error cancels the rest and is raised.

    Args:
        calls: the calls, each awaited once in its own task.

    Raises:
        Exception: the first error of a call, as itself.
    """
    await _concurrently(calls, until_first_returns=False)


async def race(calls: Iterable[Callable[[], Awaitable[Any]]]) -> None:
    """Run cancel-safe ``calls`` concurrently until the first returns; cancel the others.

    Args:
        calls: cancel-safe calls (cancelling one loses nothing).

    Raises:
        Exception: the first error of a call, as itself.
    """
    await _concurrently(calls, until_first_returns=True)
