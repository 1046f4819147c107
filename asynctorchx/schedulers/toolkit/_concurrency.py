"""Concurrency helpers over anyio task groups that raise the first error as itself.

A task group raises an ``ExceptionGroup`` when a child fails; callers of a scheduler
expect the error itself (an ``UnknownAppException``, a ``DockerEngineError``), as a
sequential loop would raise it. These helpers run calls concurrently, cancel the others
at the first error and re-raise that error unwrapped; :func:`background_tasks` hands a
block's own exception through its task group the same way.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any, TypeVar, overload

import anyio
from anyio.abc import TaskGroup

T = TypeVar("T")


async def _concurrently(
    calls: Iterable[Callable[[], Awaitable[T]]], *, until_first_returns: bool
) -> list[T]:
    """The values of the calls that returned, in the order they returned."""
    errors: list[Exception] = []
    returned: list[T] = []
    async with anyio.create_task_group() as task_group:

        async def run(call: Callable[[], Awaitable[T]]) -> None:
            try:
                returned.append(await call())
            except Exception as error:
                errors.append(error)
                task_group.cancel_scope.cancel()
            else:
                if until_first_returns:
                    task_group.cancel_scope.cancel()

        for call in calls:
            task_group.start_soon(run, call)
    if errors:
        raise errors[0]
    return returned


@asynccontextmanager
async def background_tasks() -> AsyncIterator[TaskGroup]:
    """A task group for tasks that serve a block: ``async with background_tasks() as tg:``.

    Leaving the block (normally, by an exception or a cancellation) cancels the tasks and
    waits for them; then the block's exception comes out as itself, where a plain task
    group would wrap it in an ``ExceptionGroup``. A task's own error still comes out in
    an ``ExceptionGroup``, as from any task group (the block is cancelled first).

    Yields:
        The task group (anyio's ``TaskGroup``), to start the tasks in.
    """
    error: BaseException | None = None
    async with anyio.create_task_group() as task_group:
        try:
            yield task_group
        except BaseException as exc:
            error = exc
        finally:
            task_group.cancel_scope.cancel()
    if error is not None:
        raise error


async def gather(calls: Iterable[Callable[[], Awaitable[Any]]]) -> None:
    """Run ``calls`` concurrently to the end (a task group).

    Args:
        calls: zero-argument async callables (``functools.partial`` or a lambda).

    Raises:
        Exception: the first error of a call, as itself (never in an ExceptionGroup);
            the other calls are cancelled then.
    """
    await _concurrently(calls, until_first_returns=False)


@overload  # a list of waits that return nothing, whatever their types (bound methods, partials)
async def race(calls: Iterable[Callable[[], Awaitable[None]]]) -> None: ...
@overload
async def race(calls: Iterable[Callable[[], Awaitable[T]]]) -> T: ...
async def race(calls: Iterable[Callable[[], Awaitable[Any]]]) -> Any:
    """Run ``calls`` concurrently until the first one returns; cancel the others and
    return the first one's value.

    Only cancel-safe awaits belong here (an event's wait, a read that loses no byte when
    cancelled): the losers are cancelled and must lose nothing.

    Args:
        calls: zero-argument async callables, at least one.

    Returns:
        the value of the call that returned first.

    Raises:
        Exception: the first error of a call, as itself; the others are cancelled.
        ValueError: ``calls`` is empty.
    """
    returned = await _concurrently(calls, until_first_returns=True)
    if not returned:
        raise ValueError("race() needs at least one call")
    return returned[0]


async def gather_results(calls: Iterable[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run ``calls`` concurrently and return their results in the order of ``calls``.

    Args:
        calls: zero-argument async callables.

    Raises:
        Exception: the first error of a call, as itself; the others are cancelled.
    """
    listed = list(calls)
    results: list[Any] = [None] * len(listed)

    async def store(index: int) -> None:
        results[index] = await listed[index]()

    await gather(functools.partial(store, index) for index in range(len(listed)))
    return results
