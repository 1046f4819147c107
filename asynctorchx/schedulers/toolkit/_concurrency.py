"""Concurrency over anyio task groups raising the first error as itself, as a loop would."""

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
            if errors or until_first_returns:  # an error, or a race's first return, ends all
                task_group.cancel_scope.cancel()

        for call in calls:
            task_group.start_soon(run, call)
    if errors:
        raise errors[0]
    return returned


@asynccontextmanager
async def background_tasks() -> AsyncIterator[TaskGroup]:
    """A task group whose tasks are cancelled when the block ends; its exception is unwrapped.

    A task's own error still comes out in an ``ExceptionGroup``.
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
    """Run zero-argument async ``calls`` concurrently to the end.

    Raises:
        Exception: the first error of a call, as itself; the others are cancelled.
    """
    await _concurrently(calls, until_first_returns=False)


@overload  # a list of waits that return nothing, whatever their types (bound methods, partials)
async def race(calls: Iterable[Callable[[], Awaitable[None]]]) -> None: ...
@overload
async def race(calls: Iterable[Callable[[], Awaitable[T]]]) -> T: ...
async def race(calls: Iterable[Callable[[], Awaitable[Any]]]) -> Any:
    """Return the value of the first of ``calls`` to return, cancelling the others (cancel-safe).

    Raises:
        Exception: the first error of a call, as itself; the others are cancelled.
        ValueError: ``calls`` is empty.
    """
    returned = await _concurrently(calls, until_first_returns=True)
    if not returned:
        raise ValueError("race() needs at least one call")
    return returned[0]


async def gather_results(calls: Iterable[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run ``calls`` concurrently and return their results in order; raises as :func:`gather`."""
    listed = list(calls)
    results: list[Any] = [None] * len(listed)

    async def store(index: int) -> None:
        results[index] = await listed[index]()

    await gather(functools.partial(store, index) for index in range(len(listed)))
    return results
