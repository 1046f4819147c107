"""The one status line ``run`` shows on a terminal while its app prints nothing."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING

import anyio

from asynctorchx.errors import AsyncTorchXError
from asynctorchx.schedulers.toolkit import background_tasks
from asynctorchx.specs.api import AppState, AppStatus

if TYPE_CHECKING:
    from rich.live import Live

    from asynctorchx.runner.api import Runner

#: seconds without output before the line shows, and between two redraws
QUIET_S = 2.0


def describe(status: AppStatus | None, elapsed: float) -> str:
    """The line's text: state, replicas running of all, the pending reason, elapsed time."""
    minutes, seconds = divmod(int(elapsed), 60)
    clock = f"{minutes // 60}:{minutes % 60:02d}:{seconds:02d}"
    if status is None:
        return f"asynctorchx: the scheduler does not know the app, {clock}"
    replicas = [replica for role in status.roles for replica in role.replicas]
    running = sum(replica.state == AppState.RUNNING for replica in replicas)
    parts = [status.state.name, f"{running}/{len(replicas)} replicas running"]
    if status.state == AppState.PENDING and status.msg:
        parts.append(status.msg)
    return f"asynctorchx: {', '.join([*parts, clock])}"


class StatusLine:
    """Shows the app's status on standard error once it has been quiet for :data:`QUIET_S`.

    Call :meth:`hide` before printing a line of output; the line comes back after the next
    quiet spell, and is gone once the context of :func:`status_line` is left.
    """

    def __init__(self, runner: Runner, app_handle: str) -> None:
        self._runner = runner
        self._app_handle = app_handle
        self._started = self._last_output = anyio.current_time()
        self._live: Live | None = None
        self._text: Callable[[float], str] | None = None  # by elapsed seconds, once known

    def hide(self) -> None:
        """Erase the line (if shown) before output is printed."""
        self._last_output = anyio.current_time()
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _draw(self, text: str) -> None:
        from rich.text import Text  # rich only on a terminal, after a quiet spell

        if self._live is not None:
            self._live.update(Text(text), refresh=True)
            return
        from rich.console import Console
        from rich.live import Live

        self._live = Live(
            Text(text),
            console=Console(file=sys.stderr),
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start(refresh=True)

    async def _watch(self) -> None:
        """Keep the app's latest status, from :meth:`Runner.watch` (no poll of our own)."""
        while True:
            self._text = None
            try:
                async with aclosing(self._runner.watch(self._app_handle)) as changes:
                    async for status in changes:
                        self._text = partial(describe, status)
                self._text = self._text or partial(describe, None)  # None: its scheduler forgot it
                return
            except AsyncTorchXError as error:  # the line says so; `wait` has the last word
                self._text = partial(str, f"asynctorchx: no status ({error})")
            await anyio.sleep(QUIET_S)  # then watch again

    async def _show(self) -> None:
        while True:
            quiet = anyio.current_time() - self._last_output
            if quiet < QUIET_S:
                await anyio.sleep(QUIET_S - quiet)
                continue
            if self._text is not None:
                self._draw(self._text(anyio.current_time() - self._started))
            await anyio.sleep(QUIET_S)  # the clock's next tick


@asynccontextmanager
async def status_line(runner: Runner, app_handle: str) -> AsyncIterator[StatusLine]:
    """A :class:`StatusLine` for the app, drawn only when standard error is a terminal."""
    line = StatusLine(runner, app_handle)
    if not sys.stderr.isatty():
        yield line
        return
    try:
        async with background_tasks() as task_group:
            task_group.start_soon(line._watch)
            task_group.start_soon(line._show)
            yield line
    finally:
        line.hide()
