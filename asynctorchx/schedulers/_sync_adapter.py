"""A synchronous, TorchX-style scheduler behind the async :class:`Scheduler` interface.

TorchX's schedulers (``torchx.schedulers.api.Scheduler``) are plain functions:
``schedule``, ``describe``, ``list``, ``cancel``, ``log_iter`` (a plain iterator),
``close``... A scheduler ported by rewriting its ``torchx`` imports to ``asynctorchx``
keeps those ``def`` methods, and a test double such as ``MagicMock`` has them too.
:class:`SyncSchedulerAdapter` gives such an object our async interface, so the
:class:`~asynctorchx.runner.Runner` can await it; the Runner wraps every scheduler its
factory makes for which :func:`is_sync_scheduler` is true.

How each call is made:

- A method that is a plain function runs in a worker thread
  (``anyio.to_thread.run_sync``): a synchronous library blocks, and only a thread keeps
  the event loop free while it does. Each adapter has its own
  ``anyio.CapacityLimiter``: at most ``max_threads`` of its calls run at once, and its
  threads never count against anyio's default limiter. A method that is a coroutine
  function (a partly ported scheduler) is awaited as it is.
- ``submit_dryrun`` and ``run_opts`` are pure in both interfaces and are called
  directly.
- ``log_iter``'s iterator is advanced in a worker thread, one line per call, so a
  follower (``should_tail=True``) that blocks until the next line holds one thread, not
  the event loop.
- ``wait`` and ``wait_for_state_change`` poll ``describe``: a synchronous scheduler has
  no events. TorchX's ``torchx.runner.api.Runner.wait`` polls each app every
  ``wait_interval`` seconds; here every waiter of the adapter shares one ``describe``
  per app per tick (:class:`~asynctorchx.schedulers.toolkit.BatchedPoller`), every
  :attr:`~asynctorchx.schedulers.api.Scheduler.poll_interval` seconds (1 s, growing to
  10 s while nothing changes).
- ``exists``, ``cancel``, ``submit`` (and ours: ``delete``) come from the wrapped object
  when it defines them; when it inherits them from our async base class (a ported
  subclass), the base class's versions run on the adapter, so they call the wrapped
  ``describe`` and ``_cancel_existing`` through threads too, as TorchX's base class does.

Cancellation: a worker thread cannot be interrupted. A task cancelled while it awaits a
call waits until that call returns (anyio's ``abandon_on_cancel=False``): the call's
result or error is delivered to it as if nothing happened, and the cancellation takes
effect at the task's next checkpoint. So no call outlives the task that made it, and a
``schedule`` whose request reached the backend still returns its app id (``Runner.run``
still returns the handle); a cancel scope's deadline is overrun by the rest of the call
in flight.

Closing: ``close`` forwards the wrapped ``close`` (once; later calls do nothing). From
then on every other call raises
:class:`~asynctorchx.errors.SchedulerClosedError`, including the next step of a log
iterator, so no new thread call starts. Calls already in flight run to their end,
each awaited by its own caller; ``close`` does not wait for them, because a log
follower may block until its app ends, which only ``close`` may bring about.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import aclosing
from datetime import datetime
from typing import Any, TypeVar, cast

import anyio

from asynctorchx.errors import SchedulerClosedError
from asynctorchx.schedulers._responses import DescribeAppResponse, ListAppResponse, Stream
from asynctorchx.schedulers.api import Scheduler, call_validate
from asynctorchx.specs.api import AppDef, AppDryRunInfo, AppState, CfgVal, Role, runopts

R = TypeVar("R")

#: The methods of TorchX's interface that do I/O (``torchx.schedulers.api.Scheduler``
#: and ``torchx.workspace.api.WorkspaceMixin``); one that is a plain function makes a
#: scheduler synchronous.
TORCHX_IO_METHODS = (
    "schedule",
    "describe",
    "list",
    "exists",
    "cancel",
    "_cancel_existing",
    "submit",
    "build_workspace_and_update_role",
    "close",
)

#: The anyio default limiter's size: as many threads for one adapter as anyio allows
#: for every ``to_thread`` call of an event loop.
DEFAULT_MAX_THREADS = 40

_END = object()


def is_sync_scheduler(scheduler: object) -> bool:
    """Return True when ``scheduler`` has a TorchX interface method that is a plain function.

    Checked per method over :data:`TORCHX_IO_METHODS`: a subclass of our async
    :class:`Scheduler` that overrides some of them with ``def`` counts, as does a
    ``MagicMock``; an ``AsyncMock`` or a fully async scheduler does not. A method the
    object lacks is not counted. An adapter is never synchronous.

    Args:
        scheduler: what a scheduler factory returned.
    """
    if isinstance(scheduler, SyncSchedulerAdapter):
        return False
    for name in TORCHX_IO_METHODS:
        method = getattr(scheduler, name, None)
        if callable(method) and not inspect.iscoroutinefunction(method):
            return True
    return False


def _supports_workspace(wrapped_type: type) -> bool:
    """Whether instances of ``wrapped_type`` build workspaces: our base class's answer for
    a subclass of it, else whether it has TorchX's ``WorkspaceMixin`` method."""
    if issubclass(wrapped_type, Scheduler):
        return wrapped_type.supports_workspace()
    return callable(getattr(wrapped_type, "build_workspace_and_update_role", None))


def _class_for(wrapped_type: type) -> type[SyncSchedulerAdapter]:
    """A subclass of :class:`SyncSchedulerAdapter` whose class attributes answer the
    capability questions for ``wrapped_type`` (what ``Runner.scheduler_class`` returns)."""
    streams = getattr(wrapped_type, "supported_log_streams", None)
    if not isinstance(streams, (set, frozenset)) or not all(isinstance(s, Stream) for s in streams):
        streams = frozenset(Stream)  # TorchX 0.7.0 has no such attribute: every stream
    namespace = {
        "__module__": __name__,
        "__qualname__": f"SyncSchedulerAdapter[{wrapped_type.__qualname__}]",
        "__doc__": f"{SyncSchedulerAdapter.__name__} for {wrapped_type.__qualname__}.",
        "supported_log_streams": frozenset(streams),
        "apps_live_in_process": getattr(wrapped_type, "apps_live_in_process", False) is True,
        "wrapped_supports_workspace": _supports_workspace(wrapped_type),
    }
    name = namespace["__qualname__"]
    return cast("type[SyncSchedulerAdapter]", type(str(name), (SyncSchedulerAdapter,), namespace))


class SyncSchedulerAdapter(Scheduler[Any]):
    """Our async :class:`Scheduler` interface over a synchronous TorchX-style scheduler.

    See the module docstring for how each call is made, what cancellation does and what
    ``close`` does. The Runner makes one for every scheduler its factory returns for
    which :func:`is_sync_scheduler` is true; a factory may also return one itself, to
    choose ``max_threads`` (the Runner does not wrap an adapter again).

    ``SyncSchedulerAdapter(scheduler)`` is an instance of a subclass made for
    ``type(scheduler)``, whose class attributes answer the capability questions from the
    wrapped class: :meth:`supports_workspace` (our base class's answer for a subclass of
    it, else whether it has TorchX's ``WorkspaceMixin.build_workspace_and_update_role``),
    ``supported_log_streams`` (the wrapped class's, else every stream, as TorchX 0.7.0
    has no such attribute) and ``apps_live_in_process`` (the wrapped class's, else
    False). Run options are the wrapped ``run_opts()`` (:meth:`class_run_opts` is
    ``None``: the Runner asks the instance).

    Args:
        scheduler: the synchronous scheduler (kept as :attr:`scheduler`). Its ``backend``
            and ``session_name`` are used when they are strings; else its class name
            and ``""``.
        max_threads: how many of its calls may run at once, each in a worker thread
            (>= 1). Calls overlap as TorchX's own CLI overlaps them (log threads next to
            status calls); ``1`` serializes them as a single-threaded TorchX program
            does, and then a log follower holds the thread while it waits for a line.
        poll_interval: seconds between two polls of ``describe`` for ``wait`` (> 0);
            ``None``: the wrapped scheduler's ``poll_interval`` when it has one, else
            1.0.

    Raises:
        ValueError: ``max_threads`` is below 1, or ``poll_interval`` is not positive.
    """

    #: Whether the wrapped class builds workspaces (set for each wrapped class).
    wrapped_supports_workspace: bool = False

    def __new__(cls, scheduler: object, *args: Any, **kwargs: Any) -> SyncSchedulerAdapter:
        """Make the instance of the subclass for ``type(scheduler)`` (see the class)."""
        if cls is SyncSchedulerAdapter:
            cls = _class_for(type(scheduler))
        return cast("SyncSchedulerAdapter", super().__new__(cls))

    def __init__(
        self,
        scheduler: Any,
        max_threads: int = DEFAULT_MAX_THREADS,
        poll_interval: float | None = None,
    ) -> None:
        backend = getattr(scheduler, "backend", None)
        session_name = getattr(scheduler, "session_name", None)
        super().__init__(
            backend if isinstance(backend, str) else type(scheduler).__name__,
            session_name if isinstance(session_name, str) else "",
        )
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise ValueError(f"max_threads={max_threads!r}: use an int >= 1")
        if poll_interval is None:
            wrapped_interval = getattr(scheduler, "poll_interval", None)
            if isinstance(wrapped_interval, (int, float)) and wrapped_interval > 0:
                poll_interval = float(wrapped_interval)
        elif not poll_interval > 0:
            raise ValueError(f"poll_interval={poll_interval!r}: use a number of seconds > 0")
        if poll_interval is not None:
            self.poll_interval = poll_interval
        #: The synchronous scheduler this adapter calls.
        self.scheduler = scheduler
        self._limiter = anyio.CapacityLimiter(max_threads)
        self._closed = False

    def __repr__(self) -> str:
        return f"SyncSchedulerAdapter({self.scheduler!r})"

    # ------------------------------------------------------------------ calling

    def _own(self, name: str, *, torchx: bool = True) -> Callable[..., Any] | None:
        """The wrapped object's own method ``name``, or None to use the adapter's.

        None when the object lacks it, when it is our base class's implementation (a
        ported subclass inherits it; the adapter's copy then runs on the adapter's
        methods), or, for a name TorchX 0.7.0's interface lacks (``torchx=False``), when
        the object is not one of our schedulers (a ``MagicMock`` has every name).
        """
        if not torchx and not isinstance(self.scheduler, Scheduler):
            return None
        method = getattr(self.scheduler, name, None)
        if not callable(method):
            return None
        base = Scheduler.__dict__.get(name)
        if base is not None and getattr(method, "__func__", None) is base:
            return None
        return cast("Callable[..., Any]", method)

    async def _in_thread(self, function: Callable[[], R]) -> R:
        """Run ``function`` in a worker thread under this adapter's limiter.

        Raises:
            SchedulerClosedError: the adapter is closed.
        """
        if self._closed:
            raise SchedulerClosedError(f"{self!r} is closed")
        return await anyio.to_thread.run_sync(function, limiter=self._limiter)

    async def _invoke(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Await ``method(*args, **kwargs)``: directly for a coroutine function, else in
        a worker thread (and its result too, if a plain function returned an awaitable).

        Raises:
            SchedulerClosedError: the adapter is closed.
        """
        if self._closed:
            raise SchedulerClosedError(f"{self!r} is closed")
        return await self._call(method, *args, **kwargs)

    async def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """:meth:`_invoke` without the closed check (for ``close`` itself)."""
        if inspect.iscoroutinefunction(method):
            return await method(*args, **kwargs)
        result = await anyio.to_thread.run_sync(
            functools.partial(method, *args, **kwargs), limiter=self._limiter
        )
        if inspect.isawaitable(result):
            return await result
        return result

    async def _required(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped object's ``name``, which the interface requires.

        Raises:
            NotImplementedError: the wrapped object has no such method.
        """
        method = self._own(name)
        if method is None:
            raise NotImplementedError(f"{type(self.scheduler).__name__} has no {name}()")
        return await self._invoke(method, *args, **kwargs)

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        """Close the wrapped scheduler (its ``close``, if it has one of its own), once.

        Later calls do nothing; every other call raises ``SchedulerClosedError`` from
        now on. Calls in flight are not waited for (see the module docstring).

        Raises:
            Exception: whatever the wrapped ``close`` raises, unchanged.
        """
        if self._closed:
            return
        self._closed = True  # before the call: no other call starts from now on
        method = self._own("close")
        if method is not None:
            await self._call(method)

    # ------------------------------------------------------------------ capabilities

    @classmethod
    def supports_workspace(cls) -> bool:
        """Whether the wrapped class builds a workspace into an image (see the class)."""
        return cls.wrapped_supports_workspace

    @classmethod
    def class_run_opts(cls) -> runopts | None:
        """None: the run options are the wrapped scheduler's ``run_opts()`` (an instance's)."""
        return None

    def run_opts(self) -> runopts:
        """Return the wrapped scheduler's ``run_opts()`` (called directly: it is pure)."""
        opts: runopts = self.scheduler.run_opts()
        return opts

    def _list_accepts_cfg(self) -> bool:
        """Return True when the wrapped ``list`` has a ``cfg`` parameter (TorchX after 0.7.0)."""
        try:
            return "cfg" in inspect.signature(self.scheduler.list).parameters
        except (TypeError, ValueError):  # no signature to read
            return False

    # ------------------------------------------------------------------ dry run

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        """Return the wrapped scheduler's dry run of ``app`` (called directly: it is pure).

        A scheduler of ours (a ported subclass) validates in its own ``submit_dryrun``.
        Any other is asked as ``torchx.runner.api.Runner.dryrun`` asks it, since its
        ``submit_dryrun`` does not validate: the options resolved by its
        ``run_opts().resolve(cfg)``, then ``_validate(app, backend)`` if it has one
        (with ``resolved`` too if it takes it, as TorchX's newer schedulers do), then
        ``submit_dryrun(app, resolved)``.

        Args:
            app: the app to make a request for.
            cfg: the run options, unresolved.

        Raises:
            Exception: whatever the wrapped scheduler raises, unchanged.
        """
        if isinstance(self.scheduler, Scheduler):
            info: AppDryRunInfo[Any] = self.scheduler.submit_dryrun(app, cfg)
            return info
        resolved = self.scheduler.run_opts().resolve(cfg)
        validate = getattr(self.scheduler, "_validate", None)
        if callable(validate):
            call_validate(validate, app, self.backend, resolved)
        info = self.scheduler.submit_dryrun(app, resolved)
        return info

    def dryrun_resolved(self, app: AppDef, resolved: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        """Return the wrapped ``dryrun_resolved``, else its ``submit_dryrun`` (TorchX's).

        Args:
            app: the app to make a request for.
            resolved: the run options, resolved (resolving them again changes nothing).

        Raises:
            Exception: whatever the wrapped method raises, unchanged.
        """
        method = self._own("dryrun_resolved", torchx=False)
        if method is None:
            return self.submit_dryrun(app, resolved)
        info: AppDryRunInfo[Any] = method(app, resolved)
        return info

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Any]:
        """The wrapped scheduler's dry run (:meth:`dryrun_resolved`)."""
        return self.dryrun_resolved(app, cfg)

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Call the wrapped ``build_workspace_and_update_role`` if it has its own.

        Args:
            role: the role whose image is updated.
            workspace: the directory to build.
            cfg: the resolved run options.

        Raises:
            Exception: whatever the wrapped method raises, unchanged.
        """
        method = self._own("build_workspace_and_update_role")
        if method is not None:
            await self._invoke(method, role, workspace, cfg)

    # ------------------------------------------------------------------ submit and act

    async def submit(
        self, app: AppDef, cfg: Mapping[str, CfgVal], workspace: str | None = None
    ) -> str:
        """Return the wrapped ``submit``'s app id, else our base class's ``submit``.

        Raises:
            Exception: whatever the wrapped scheduler raises, unchanged.
        """
        method = self._own("submit")
        if method is None:
            return await super().submit(app, cfg, workspace)
        app_id: str = await self._invoke(method, app, cfg, workspace)
        return app_id

    async def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Return the app id of the wrapped ``schedule(dryrun_info)``.

        Raises:
            Exception: whatever the wrapped ``schedule`` raises, unchanged.
        """
        app_id: str = await self._required("schedule", dryrun_info)
        return app_id

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Return the wrapped ``describe(app_id)``.

        Raises:
            Exception: whatever the wrapped ``describe`` raises, unchanged.
        """
        response: DescribeAppResponse | None = await self._required("describe", app_id)
        return response

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Return the wrapped ``list()`` (``list(cfg)`` when it takes ``cfg`` and one is given).

        Raises:
            Exception: whatever the wrapped ``list`` raises, unchanged.
        """
        if cfg is not None and self._list_accepts_cfg():
            apps: list[ListAppResponse] = await self._required("list", cfg=cfg)
        else:
            apps = await self._required("list")
        return apps

    async def exists(self, app_id: str) -> bool:
        """Return the wrapped ``exists``, else whether ``describe`` knows the app.

        Raises:
            Exception: whatever the wrapped scheduler raises, unchanged.
        """
        method = self._own("exists")
        if method is None:
            return await super().exists(app_id)
        return bool(await self._invoke(method, app_id))

    async def cancel(self, app_id: str) -> None:
        """Call the wrapped ``cancel``, else ``_cancel_existing`` if the app exists.

        Raises:
            Exception: whatever the wrapped scheduler raises, unchanged.
        """
        method = self._own("cancel")
        if method is None:
            await super().cancel(app_id)
        else:
            await self._invoke(method, app_id)

    async def _cancel_existing(self, app_id: str) -> None:
        """Call the wrapped ``_cancel_existing(app_id)``.

        Raises:
            Exception: whatever the wrapped method raises, unchanged.
        """
        await self._required("_cancel_existing", app_id)

    async def delete(self, app_id: str) -> None:
        """Call the wrapped ``delete`` of our interface, else our base class's ``delete``.

        Raises:
            Exception: whatever the wrapped scheduler raises, unchanged.
        """
        method = self._own("delete", torchx=False)
        if method is None:
            await super().delete(app_id)
        else:
            await self._invoke(method, app_id)

    async def describe_native(self, app_id: str) -> Any | None:
        """Return the wrapped ``describe_native`` of our interface, else None.

        Raises:
            Exception: whatever the wrapped method raises, unchanged.
        """
        method = self._own("describe_native", torchx=False)
        return None if method is None else await self._invoke(method, app_id)

    async def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        """Wait until the app is terminal, polling ``describe`` (see the module docstring).

        A wrapped scheduler of ours that has its own ``wait`` is asked instead.

        Args:
            app_id: the app's id on this scheduler.
            timeout: seconds to wait at most; ``None``: no limit.

        Raises:
            TimeoutError: ``timeout`` seconds passed before the app ended.
        """
        method = self._own("wait", torchx=False)
        if method is None:
            return await super().wait(app_id, timeout)
        response: DescribeAppResponse | None = await self._invoke(method, app_id, timeout)
        return response

    async def wait_for_state_change(
        self, app_id: str, state: AppState, timeout: float | None = None
    ) -> DescribeAppResponse | None:
        """Wait until the app's state is no longer ``state``, polling ``describe``.

        A wrapped scheduler of ours that has its own ``wait_for_state_change`` is asked
        instead.

        Args:
            app_id: the app's id on this scheduler.
            state: the state the caller last saw.
            timeout: seconds to wait at most; ``None``: no limit.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """
        method = self._own("wait_for_state_change", torchx=False)
        if method is None:
            return await super().wait_for_state_change(app_id, state, timeout)
        response: DescribeAppResponse | None = await self._invoke(method, app_id, state, timeout)
        return response

    # ------------------------------------------------------------------ logs

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> AsyncIterator[str]:
        """Iterate over the wrapped ``log_iter``'s lines, as they are (an async iterator).

        The wrapped ``log_iter`` is called with TorchX's arguments (``streams`` by
        keyword) at the first step, in a worker thread; a plain iterator is then
        advanced in a worker thread, one line per step, and closed (its ``close``, in a
        worker thread) when the iteration ends early. An async iterator (a scheduler of
        ours) is iterated as it is.

        Args:
            app_id: the app's id on this scheduler.
            role_name: the role whose replica is read.
            k: the replica id (0-based).
            regex: keep only lines in which it matches (the wrapped scheduler applies it).
            since: the first line's time (where the wrapped scheduler honours it).
            until: the last line's time (likewise).
            should_tail: follow the log until the app is terminal.
            streams: stdout, stderr or combined; ``None``: the scheduler's default.

        Raises:
            SchedulerClosedError: (when read) the adapter was closed.
            Exception: (when read) whatever the wrapped scheduler raises, unchanged.
        """
        args = (app_id, role_name, k, regex, since, until, should_tail)
        return self._lines(args, streams)

    async def _lines(self, args: tuple[Any, ...], streams: Stream | None) -> AsyncIterator[str]:
        method = self._own("log_iter")
        if method is None:  # ours: the base class's log_iter reads the async _log_iter
            lines: Any = self.scheduler.log_iter(*args, streams=streams)
        elif inspect.isasyncgenfunction(method):
            lines = method(*args, streams=streams)
        else:
            lines = await self._invoke(method, *args, streams=streams)
        if hasattr(lines, "__anext__"):
            async with aclosing(lines):
                async for line in lines:
                    yield line
            return
        iterator: Iterator[str] = await self._in_thread(functools.partial(iter, lines))
        try:
            while (
                line := await self._in_thread(functools.partial(next, iterator, _END))
            ) is not _END:
                yield cast(str, line)
        finally:
            close = getattr(iterator, "close", None)
            if callable(close):  # a generator: run its cleanup, even when cancelled
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(close, limiter=self._limiter)
