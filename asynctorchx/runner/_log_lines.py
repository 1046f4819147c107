""":class:`LogLines`, what :meth:`Runner.log_lines <asynctorchx.runner.Runner.log_lines>`
returns: an async iterator of lines that can also be awaited to open the log first.

TorchX's ``torchx.runner.api.Runner.log_lines`` checks the app when it is called and
raises ``UnknownAppException`` before any line is read. An async method that returns an
async iterator cannot check anything when called: the check needs an ``await``. So the
returned object offers both: ``async for line in runner.log_lines(...)`` checks at the
first step (the contract so far), and ``lines = await runner.log_lines(...)`` checks
at once and returns the same object, opened. A web handler can then answer 404 before it
starts a streamed response.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any


class LogLines(AsyncIterator[str]):
    """Lines of one replica's log, opened on first use (see the module docstring).

    Args:
        opener: ``await opener()`` checks the app and returns the scheduler's async
            iterator of lines; called once, by the first ``await`` or the first step.

    Not for two tasks at once, as an async generator: a step while another is in
    progress raises ``RuntimeError``. ``aclose()`` (or ``contextlib.aclosing``) closes
    the scheduler's iterator.
    """

    def __init__(self, opener: Callable[[], Awaitable[AsyncIterator[str]]]) -> None:
        self._opener: Callable[[], Awaitable[AsyncIterator[str]]] | None = opener
        self._lines: AsyncIterator[str] | None = None
        self._running = False

    def __await__(self) -> Generator[Any, None, LogLines]:
        """Open the log (check the app) and return this object, ready to iterate.

        Raises:
            UnknownAppException: the scheduler does not know the app.
        """
        return self._open().__await__()

    async def _open(self) -> LogLines:
        if self._running:
            raise RuntimeError("LogLines is already being read by another task")
        self._running = True
        try:
            opener, self._opener = self._opener, None
            if opener is not None:
                self._lines = await opener()
        finally:
            self._running = False
        return self

    async def __anext__(self) -> str:
        """Return the next line (opening the log first, on the first step).

        Raises:
            StopAsyncIteration: no more lines (or the log was closed).
            UnknownAppException: (first step) the scheduler does not know the app.
        """
        await self._open()
        if self._lines is None:  # closed before it was opened
            raise StopAsyncIteration
        self._running = True
        try:
            return await self._lines.__anext__()
        finally:
            self._running = False

    async def aclose(self) -> None:
        """Close the scheduler's iterator (idempotent; an unopened log is never opened)."""
        self._opener = None
        lines, self._lines = self._lines, None
        close = getattr(lines, "aclose", None)
        if close is not None:
            await close()
