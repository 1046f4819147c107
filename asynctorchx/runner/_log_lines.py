""":class:`LogLines`, what :meth:`Runner.log_lines <asynctorchx.runner.Runner.log_lines>`
returns: an async iterator of lines that can also be awaited to open the log first.

TorchX's ``torchx.runner.api.Runner.log_lines`` raises ``UnknownAppException`` when
called, before any line is read; an async method cannot check anything before an
``await``. So ``async for line in runner.log_lines(...)`` checks at the first step, and
``lines = await runner.log_lines(...)`` checks at once and returns the same object,
opened (a web handler can then answer 404 before it starts a streamed response).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator
from contextlib import aclosing
from typing import Any

import anyio

from asynctorchx.schedulers.toolkit import LogBlock


class LogLines(AsyncIterator[str]):
    """Lines of one replica's log, opened on first use (see the module docstring).

    An async iterator of the lines that ``await`` opens first. Every line comes from one
    async generator over the scheduler's blocks: a coroutine per line (an ``__anext__``
    of this class) would cost the throughput benchmark 5's ``runner_log_lines`` row
    guards. Not for two tasks at once, as an async generator: a step while another is in
    progress raises ``RuntimeError``. ``aclose()`` closes the scheduler's iterator.

    Args:
        opener: ``await opener()`` checks the app and returns the scheduler's blocks of
            lines (``Scheduler.log_blocks``); called once, by the first ``await`` or the
            first step.
    """

    __slots__ = ("_blocks", "_lines", "_opener", "_opening")

    def __init__(self, opener: Callable[[], Awaitable[AsyncIterator[LogBlock]]]) -> None:
        self._opener: Callable[[], Awaitable[AsyncIterator[LogBlock]]] | None = opener
        self._opening = anyio.Lock()
        self._blocks: AsyncIterator[LogBlock] | None = None
        self._lines = self._read()  # started by the first step, if any

    def __await__(self) -> Generator[Any, None, LogLines]:
        """Open the log (check the app) and return this object, ready to iterate.

        Raises:
            UnknownAppException: the scheduler does not know the app.
        """
        return self._open().__await__()

    async def _open(self) -> LogLines:
        async with self._opening:
            opener, self._opener = self._opener, None
            if opener is not None:
                self._blocks = await opener()
        return self

    def __aiter__(self) -> AsyncIterator[str]:
        """The async generator of the lines (the same one each time)."""
        return self._lines

    def __anext__(self) -> Awaitable[str]:
        """Return the next line (opening the log first, on the first step).

        Raises:
            StopAsyncIteration: no more lines (or the log was closed).
            UnknownAppException: (first step) the scheduler does not know the app.
        """
        return self._lines.__anext__()

    async def _read(self) -> AsyncGenerator[str]:
        await self._open()
        if self._blocks is None:  # closed before it was opened
            return
        async with aclosing(self._blocks):  # type: ignore[type-var]
            async for _, lines in self._blocks:
                for line in lines:
                    yield line

    async def aclose(self) -> None:
        """Close the scheduler's iterator (idempotent; an unopened log is never opened)."""
        self._opener = None
        blocks, self._blocks = self._blocks, None
        await self._lines.aclose()
        close = getattr(blocks, "aclose", None)
        if close is not None:
            await close()
