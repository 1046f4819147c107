""":class:`LogLines`, what :meth:`asynctorchx.runner.Runner.log_lines` returns."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator
from contextlib import aclosing
from typing import Any

import anyio

from asynctorchx.schedulers.toolkit import LogBlock


class LogLines(AsyncIterator[str]):
    """The lines of one replica's log, an async iterator that opens the log at its first step.

    TorchX's ``Runner.log_lines`` raises ``UnknownAppException`` at the call; here
    ``await runner.log_lines(...)`` opens the log at once and returns the same iterator.
    For one task at a time.

    Args:
        opener: ``await opener()`` checks the app and returns the scheduler's blocks.
    """

    __slots__ = ("_blocks", "_lines", "_opener", "_opening")

    def __init__(self, opener: Callable[[], Awaitable[AsyncIterator[LogBlock]]]) -> None:
        self._opener: Callable[[], Awaitable[AsyncIterator[LogBlock]]] | None = opener
        self._opening = anyio.Lock()
        self._blocks: AsyncIterator[LogBlock] | None = None
        self._lines = self._read()

    def __await__(self) -> Generator[Any, None, LogLines]:
        """Open the log and return this iterator; ``UnknownAppException``: an unknown app."""
        return self._open().__await__()

    async def _open(self) -> LogLines:
        async with self._opening:
            opener, self._opener = self._opener, None
            if opener is not None:
                self._blocks = await opener()
        return self

    def __aiter__(self) -> AsyncIterator[str]:
        # the generator itself, not a coroutine per line (benchmark 5's runner_log_lines row)
        return self._lines

    def __anext__(self) -> Awaitable[str]:
        """The next line, the log opened at the first step."""
        return self._lines.__anext__()

    async def _read(self) -> AsyncGenerator[str]:
        await self._open()
        if self._blocks is None:
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
