"""A synchronous, TorchX-style scheduler behind the async :class:`Scheduler` interface.

The Runner wraps each scheduler for which :func:`is_sync_scheduler` is true (a TorchX
plugin ported by rewriting its imports, an object with TorchX's interface, a ``MagicMock``).
A wrapped plain method runs in a worker thread under the adapter's limiter; one the wrapped
object lacks or inherits from our base class runs as the base class's (``wait`` polls the
wrapped ``describe``, as TorchX's ``Runner.wait`` does). A plain ``log_iter`` is advanced in
a thread and closed (shielded) when the reader stops early. A task cancelled during a call
waits for its thread. After ``close`` every call raises ``SchedulerClosedError``.
"""

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
    """Whether a method of :data:`TORCHX_IO_METHODS` of ``scheduler`` (what a factory
    returned) is a plain function: a ported ``def`` scheduler, a ``MagicMock``."""
    if isinstance(scheduler, SyncSchedulerAdapter):
        return False
    methods = (getattr(scheduler, name, None) for name in TORCHX_IO_METHODS)
    return any(callable(m) and not inspect.iscoroutinefunction(m) for m in methods)


def _parameters(function: Callable[..., Any] | None) -> Mapping[str, inspect.Parameter]:
    """The parameters of ``function``; none when it has no signature (None, C code)."""
    try:
        return inspect.signature(function).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return {}


def _capabilities_of(scheduler: Any) -> Capabilities:
    """The record of the scheduler class ``type(scheduler)`` (every default where it has
    none, as TorchX 0.7.0), with its instance's ``run_opts``, and a workspace build where
    the class has TorchX's ``build_workspace_and_update_role`` of its own."""
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
    """Our async :class:`Scheduler` interface over a synchronous TorchX-style scheduler.

    Its :attr:`capabilities` are made once, from the wrapped scheduler's class (every
    default when it declares none, as TorchX 0.7.0) and its ``run_opts()``.

    Args:
        scheduler: the synchronous scheduler (:attr:`scheduler`); its ``backend`` and
            ``session_name`` when they are strings, else its class name and ``""``.
        max_threads: calls that may run at once, each in a worker thread (>= 1); ``1``
            serializes them as a single-threaded TorchX program does.
        poll_interval: seconds between two polls of ``describe`` for ``wait`` (> 0);
            ``None``: the wrapped scheduler's ``poll_interval``, else 1.0.

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
        #: The synchronous scheduler this adapter calls.
        self.scheduler = scheduler
        self.capabilities = _capabilities_of(scheduler)
        self._limiter = anyio.CapacityLimiter(max_threads)
        self._closed = False

    def _own(self, name: str, *, torchx: bool = True) -> Callable[..., Any] | None:
        """The wrapped own ``name`` (``torchx=False``: only on a subclass of ours), or None."""
        method = getattr(self.scheduler, name, None)
        inherited = getattr(method, "__func__", None) is Scheduler.__dict__.get(name)
        foreign = not torchx and not isinstance(self.scheduler, Scheduler)
        return None if foreign or inherited or not callable(method) else method

    async def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """:meth:`_run`, unless the adapter is closed."""
        if self._closed:
            raise SchedulerClosedError(f"SyncSchedulerAdapter({self.scheduler!r}) is closed")
        return await self._run(method, *args, **kwargs)

    async def _run(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Await ``method(*args, **kwargs)``, in a worker thread unless a coroutine."""
        if inspect.iscoroutinefunction(method):
            return await method(*args, **kwargs)
        call = functools.partial(method, *args, **kwargs)
        result = await anyio.to_thread.run_sync(call, limiter=self._limiter)
        return await result if inspect.isawaitable(result) else result

    async def _delegate(self, name: str, *args: Any, torchx: bool = True, **kwargs: Any) -> Any:
        """Call the wrapped object's own ``name``, else the base class's on the adapter
        (``NotImplementedError`` for one the base class leaves abstract)."""
        if (method := self._own(name, torchx=torchx)) is not None:
            return await self._call(method, *args, **kwargs)
        if name in ("schedule", "describe", "list", "_cancel_existing"):
            raise NotImplementedError(f"{type(self.scheduler).__name__} has no {name}()")
        return await getattr(super(), name)(*args, **kwargs)

    async def close(self) -> None:
        """Close the wrapped scheduler (its own ``close``, if it has one), once."""
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
        """Ours: our steps; else ``validate_app``, then as TorchX's ``Runner.dryrun`` asks."""
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
        """Call the wrapped ``build_workspace_and_update_role`` if it has its own."""
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
        """The wrapped own ``cancel`` (called for a running app only, as TorchX's
        ``Runner.cancel`` does), else its ``_cancel_existing``."""
        name = "cancel" if self._own("cancel") else "_cancel_existing"
        await self._delegate(name, app_id)

    async def delete(self, app_id: str) -> None:
        """The wrapped ``delete`` of our interface, else our base class's."""
        await self._delegate("delete", app_id, torchx=False)

    async def _log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        """:meth:`log_iter`'s lines from the ``start``-th on, a line a block (a resume reads
        the log again)."""
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
        """The wrapped ``log_iter``'s lines, as they are (it applies TorchX's arguments)."""
        # ours inherits the base class's log_iter, on its _log_blocks; an async generator
        # function or the base's log_iter gives an async iterator, made in the thread
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
