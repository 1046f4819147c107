"""Merged log streams: :class:`LogLine` and :func:`fan_in`, behind :meth:`Runner.log_stream`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio
import attrs
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from asynctorchx.schedulers.toolkit import background_tasks

T = TypeVar("T")

#: One task's work for :func:`fan_in`: send items into the given stream, then return.
Producer = Callable[[MemoryObjectSendStream[T]], Awaitable[None]]


@attrs.frozen
class LogLine:
    """One log line of a merged stream (:meth:`Runner.log_stream`).

    Args:
        role: the role's name.
        replica_id: the replica's id ``k`` (0-based).
        line: the text, with its trailing ``\\n`` when the replica wrote one.
    """

    role: str
    replica_id: int
    line: str


async def deliver(send: MemoryObjectSendStream[T], item: T) -> bool:
    """Send ``item``, waiting while the buffer is full; ``False`` once the reader left."""
    try:
        await send.send(item)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        return False
    return True


async def _produce(
    producer: Producer[T],
    send: MemoryObjectSendStream[T],
    failures: list[Exception],
    scope: anyio.CancelScope,
) -> None:
    """Run ``producer`` with its own ``send``; on an error, record it and cancel ``scope``."""
    async with send:
        try:
            await producer(send)
        except Exception as exc:
            failures.append(exc)
            scope.cancel()


@asynccontextmanager
async def fan_in(
    producers: Iterable[Producer[T]], max_buffer_size: int
) -> AsyncIterator[MemoryObjectReceiveStream[T]]:
    """Run each producer in its own task, all sending into one stream of ``max_buffer_size``.

    The stream ends when every producer returned; the first producer error is raised as itself.
    """
    send, receive = anyio.create_memory_object_stream[T](max_buffer_size=max_buffer_size)
    failures: list[Exception] = []
    try:
        async with background_tasks() as task_group:
            async with send:
                for producer in producers:
                    task_group.start_soon(
                        _produce, producer, send.clone(), failures, task_group.cancel_scope
                    )
            async with receive:
                yield receive
    except anyio.get_cancelled_exc_class():
        if not failures:
            raise
    if failures:
        # the producer's error wins over the cancellation it caused in the block
        raise failures[0]
