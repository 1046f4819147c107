"""A synchronous TorchX-style scheduler behind the async :class:`Scheduler` interface."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import aclosing
from typing import Any, cast

import anyio
import attrs

from asynctorchx.errors import SchedulerClosedError
from asynctorchx.schedulers._responses import DescribeAppResponse, ListAppResponse
from asynctorchx.schedulers.api import Capabilities, Scheduler
from asynctorchx.schedulers.toolkit import LogBlock, LogPosition, LogQuery, validate_app
from asynctorchx.specs.api import AppDef, AppDryRunInfo, CfgVal, Role, runopts

#: TorchX's methods that do I/O (``torchx.schedulers.api.Scheduler``, ``WorkspaceMixin``).
TORCHX_IO_METHODS = (
    *("schedule", "describe", "list", "exists", "cancel", "_cancel_existing", "submit"),
    *("build_workspace_and_update_role", "close"),
)


def is_sync_scheduler(scheduler: object) -> bool:
    """Whether a :data:`TORCHX_IO_METHODS` method of ``scheduler`` is a plain function."""
    if isinstance(scheduler, SyncSchedulerAdapter):
        return False
    methods = (getattr(scheduler, name, None) for name in TORCHX_IO_METHODS)
    return any(callable(m) and not inspect.iscoroutinefunction(m) for m in methods)


def _parameters(function: Callable[..., Any] | None) -> Mapping[str, inspect.Parameter]:
    """The parameters of ``function``; none without a signature."""
    try:
        return inspect.signature(function).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return {}


def _capabilities_of(scheduler: Any) -> Capabilities:
    """The class's record (defaults as TorchX 0.7.0), its ``run_opts`` and its own build."""
    declared = getattr(type(scheduler), "capabilities", None)
    caps = declared if isinstance(declared, Capabilities) else Capabilities()
    build = getattr(type(scheduler), "build_workspace_and_update_role", None)
    builds = callable(build) and build is not Scheduler.build_workspace_and_update_role
    return attrs.evolve(
        caps,
        run_opts=lambda: cast(runopts, scheduler.run_opts()),
        workspace=caps.workspace or ("image" if builds else None),
    )


class SyncSchedulerAdapter(Scheduler[Any]):
    """The async :class:`Scheduler` interface over a synchronous TorchX-style scheduler.

    Plain methods run in worker threads; missing ones are the base class's (``wait`` polls
    ``describe``); after ``close`` a call raises ``SchedulerClosedError``.

    Args:
        scheduler: the synchronous scheduler; its ``backend`` and ``session_name`` are used.
        max_threads: calls running at once, each in a worker thread (>= 1).
        poll_interval: seconds between polls for ``wait``; ``None``: the wrapped one's, or 1.

    Raises:
        ValueError: ``max_threads`` is below 1, or ``poll_interval`` is not positive.
    """

    def __init__(
        self, scheduler: Any, max_threads: int = 40, poll_interval: float | None = None
    ) -> None:
        backend = getattr(scheduler, "backend", None)
        session = getattr(scheduler, "session_name", None)
        super().__init__(
            backend if isinstance(backend, str) else type(scheduler).__name__,
            session if isinstance(session, str) else "",
        )
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise ValueError(f"max_threads={max_threads!r}: use an int >= 1")
        if poll_interval is not None and not poll_interval > 0:
            raise ValueError(f"poll_interval={poll_interval!r}: use a number of seconds > 0")
        wrapped = getattr(scheduler, "poll_interval", None)
        if poll_interval is None and isinstance(wrapped, (int, float)) and wrapped > 0:
            poll_interval = float(wrapped)
        self.poll_interval = poll_interval or self.poll_interval
        self.scheduler = scheduler
        self.capabilities = _capabilities_of(scheduler)
        self._limiter = anyio.CapacityLimiter(max_threads)
        self._closed = False

    def _own(self, name: str, *, torchx: bool = True) -> Callable[..., Any] | None:
        """The wrapped object's own ``name`` (``torchx=False``: only ours), or None."""
        method = getattr(self.scheduler, name, None)
        inherited = getattr(method, "__func__", None) is Scheduler.__dict__.get(name)
        foreign = not torchx and not isinstance(self.scheduler, Scheduler)
        return None if foreign or inherited or not callable(method) else method

    async def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise SchedulerClosedError(f"SyncSchedulerAdapter({self.scheduler!r}) is closed")
        return await self._run(method, *args, **kwargs)

    async def _run(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Await ``method``, in a worker thread unless a coroutine."""
        if inspect.iscoroutinefunction(method):
            return await method(*args, **kwargs)
        call = functools.partial(method, *args, **kwargs)
        result = await anyio.to_thread.run_sync(call, limiter=self._limiter)
        return await result if inspect.isawaitable(result) else result

    async def _delegate(self, name: str, *args: Any, torchx: bool = True, **kwargs: Any) -> Any:
        """Call the wrapped object's own ``name``, else the base class's."""
        if (method := self._own(name, torchx=torchx)) is not None:
            return await self._call(method, *args, **kwargs)
        if name in ("schedule", "describe", "list", "_cancel_existing"):
            raise NotImplementedError(f"{type(self.scheduler).__name__} has no {name}()")
        return await getattr(super(), name)(*args, **kwargs)

    async def close(self) -> None:
        """Close the wrapped scheduler once."""
        if not self._closed:
            self._closed = True  # before the call: no other call starts from now on
            if (method := self._own("close")) is not None:
                await self._run(method)

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """The wrapped ``_validate(app, scheduler)`` (TorchX 0.7.0), or with ``cfg`` (ours)."""
        if callable(validate := getattr(self.scheduler, "_validate", None)):
            params = _parameters(validate).values()
            many = not params or any(p.kind is p.VAR_POSITIONAL for p in params)
            validate(*(app, scheduler, cfg)[: 3 if many else len(params)])

    def dryrun_resolved(self, app: AppDef, resolved: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        """Our steps for ours; else ``validate_app``, then as TorchX's ``Runner.dryrun``."""
        if isinstance(self.scheduler, Scheduler):
            return super().dryrun_resolved(app, resolved)
        validate_app(app)
        self._validate(app, self.backend, resolved)
        return cast("AppDryRunInfo[Any]", self.scheduler.submit_dryrun(app, resolved))

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        return cast("AppDryRunInfo[Any]", self.scheduler._submit_dryrun(app, cfg))

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        if (method := self._own("build_workspace_and_update_role")) is not None:
            await self._call(method, role, workspace, cfg)

    async def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        return cast(str, await self._delegate("schedule", dryrun_info))

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        return cast("DescribeAppResponse | None", await self._delegate("describe", app_id))

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """The wrapped ``list()``; ``list(cfg)`` when it takes ``cfg`` (TorchX after 0.7.0)."""
        if cfg is not None and "cfg" in _parameters(self._own("list")):
            return cast("list[ListAppResponse]", await self._delegate("list", cfg=cfg))
        return cast("list[ListAppResponse]", await self._delegate("list"))

    async def _cancel_existing(self, app_id: str) -> None:
        """The wrapped own ``cancel`` (as TorchX's ``Runner.cancel``), else ``_cancel_existing``."""
        name = "cancel" if self._own("cancel") else "_cancel_existing"
        await self._delegate(name, app_id)

    async def delete(self, app_id: str) -> None:
        await self._delegate("delete", app_id, torchx=False)

    async def _log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        """:meth:`log_iter`'s lines from the ``start``-th on, one per block."""
        if not isinstance(start, int):
            raise ValueError(f"{start!r} is not a position of this log: give 0 or a line index")
        args = (query.role_name, query.k, query.regex, query.since, query.until)
        lines = self.log_iter(app_id, *args, query.should_tail, streams=query.streams)
        async with aclosing(lines):  # type: ignore[type-var]
            index = 0
            async for line in lines:
                if index >= start:
                    yield LogBlock(index, (line,))
                index += 1

    async def log_iter(self, app_id: str, *args: Any, **kwargs: Any) -> AsyncIterator[str]:
        """The wrapped ``log_iter``'s lines, as they are."""
        method = self._own("log_iter") or self.scheduler.log_iter
        lines = await self._call(method, app_id, *args, **kwargs)
        if hasattr(lines, "__anext__"):
            async with aclosing(lines):
                async for line in lines:
                    yield line
            return
        iterator: Iterator[str] = await self._call(iter, lines)
        end = object()
        try:
            while (line := await self._call(next, iterator, end)) is not end:
                yield cast(str, line)
        finally:
            if callable(close := getattr(iterator, "close", None)):
                with anyio.CancelScope(shield=True):  # a generator's cleanup, even cancelled
                    await anyio.to_thread.run_sync(close, limiter=self._limiter)
