"""``LocalScheduler``, TorchX's ``torchx.schedulers.local_scheduler.LocalScheduler``, awaitable."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from asynctorchx.errors import SchedulerClosedError, UnknownAppException
from asynctorchx.schedulers.api import (
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
)
from asynctorchx.schedulers.ids import make_unique
from asynctorchx.schedulers.local._app_views import (
    AppView,
    LiveApp,
    list_recorded_apps,
    list_response,
    read_recorded_app,
)
from asynctorchx.schedulers.local._child_watcher import use_pidfd_child_watcher
from asynctorchx.schedulers.local._log_files import check_log_dir, create_log_dirs
from asynctorchx.schedulers.local._records import LOGS_DIR, RecordKeeper
from asynctorchx.schedulers.local._request import (
    ImageProvider,
    Opts,
    PopenRequest,
    RequestContext,
    build_popen_request,
    gpu_count,
)
from asynctorchx.schedulers.local._supervisor import LocalApp, supervise
from asynctorchx.schedulers.local._watch import ChangeWatch
from asynctorchx.schedulers.toolkit import (
    LogBlock,
    LogPosition,
    LogQuery,
    validate_app_id,
    validate_name,
)
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    CfgVal,
    is_terminal,
    make_app_handle,
)

logger = logging.getLogger(__name__)

#: Prefix of the temporary log directory used without ``log_dir`` when there is no records
#: directory to keep the logs in; removed on close.
TEMP_LOG_DIR_PREFIX = "asynctorchx_"


class LocalScheduler(Scheduler[PopenRequest]):
    """Runs each replica as a process on this host; TorchX's ``LocalScheduler``, awaitable.

    Use ``async with scheduler:``; submitting outside it raises ``SchedulerClosedError``.

    Args:
        session_name: the runner session, part of app handles and of the log path.
        image_provider_class: builds the :class:`ImageProvider` from the run config.
        cache_size: how many finished apps are kept; beyond it the earliest finished is
            forgotten (its temporary log directory removed). Running apps are never refused.
        extra_paths: directories put in front of ``PATH`` for every replica.
        backend: the scheduler's name, ``local_cwd`` or ``local_dir``.

    Raises:
        ValueError: ``cache_size`` is not positive.
    """

    capabilities = Capabilities(opts=Opts, apps_live_in_process=True)

    def __init__(
        self,
        session_name: str,
        image_provider_class: Callable[[Mapping[str, CfgVal]], ImageProvider],
        cache_size: int = 100,
        extra_paths: list[str] | None = None,
        backend: str = "local_cwd",
    ) -> None:
        super().__init__(backend, session_name)
        if cache_size <= 0:
            raise ValueError(f"cache_size is {cache_size}: it must be a positive number of apps")
        self._image_provider_class = image_provider_class
        self._cache_size = cache_size
        self._extra_paths = list(extra_paths or [])
        self._running: dict[str, LocalApp] = {}
        self._finished: dict[str, LocalApp] = {}  # first finished first
        self._task_group: anyio.abc.TaskGroup | None = None
        self._closed = False
        self._temp_log_dir: str | None = None
        self._records = RecordKeeper(backend, session_name)
        self._recording = False

    async def __aenter__(self) -> LocalScheduler:
        if self._closed:
            raise SchedulerClosedError(
                f"this {self.backend} scheduler is closed: create a new one to run apps"
            )
        if self._task_group is not None:
            raise SchedulerClosedError(f"this {self.backend} scheduler is already entered")
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        task_group = self._task_group
        try:
            await self.close()
        finally:
            if task_group is not None:
                task_group.cancel_scope.cancel()
                # raised as itself, never wrapped in an ExceptionGroup
                await task_group.__aexit__(None, None, None)
            self._task_group = None

    async def close(self) -> None:
        """Terminate every app still running, as ``cancel`` does, and wait; remove the temporary
        log directory. Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            try:
                running = list(self._running.values())
                for app in running:
                    app.request_cancel()
                for app in running:
                    await LiveApp(app).wait_until(lambda response: is_terminal(response.state))
            except Exception:
                logger.exception("closing the %s scheduler", self.backend)
            finally:
                self._records.flush()
                if self._temp_log_dir is not None:
                    await _remove_tree(self._temp_log_dir)
                    self._temp_log_dir = None

    def _base_log_dir(self, cfg: Mapping[str, CfgVal]) -> str:
        log_dir = cfg.get("log_dir")
        if isinstance(log_dir, str) and log_dir:
            # the user's own links are resolved now: a link planted later is refused
            return os.path.realpath(log_dir)
        records = self._records.directory
        if records is not None:
            # kept with the app's record, and removed when the record is pruned
            return os.path.join(records, LOGS_DIR)
        if self._temp_log_dir is None:
            # no records directory: named here only, schedule creates it
            name = TEMP_LOG_DIR_PREFIX + secrets.token_hex(8)
            self._temp_log_dir = os.path.join(tempfile.gettempdir(), name)
        return self._temp_log_dir

    def _cuda_device_count(self) -> int:
        """How many GPUs this host has (``nvidia-smi -L``; 0 without it), as TorchX's
        ``LocalScheduler._cuda_device_count``: the hook to override for GPU assignment."""
        return gpu_count()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[PopenRequest]:
        validate_name("session name", self.session_name)
        app_id = make_unique(app.name)
        root = self._base_log_dir(cfg)
        context = RequestContext(
            app_id=app_id,
            app_log_dir=os.path.join(root, self.session_name, app_id),
            job_id=make_app_handle(self.backend, self.session_name, app_id),
            image_provider=self._image_provider_class(cfg),
            extra_paths=tuple(self._extra_paths),
            cuda_device_count=self._cuda_device_count,
        )
        request = build_popen_request(app, cfg, context)
        replica_dirs = [d for dirs in request.role_log_dirs.values() for d in dirs]
        check_log_dir(root, replica_dirs)
        return AppDryRunInfo(request, str)

    async def schedule(self, dryrun_info: AppDryRunInfo[PopenRequest]) -> str:
        """Start every replica of the request concurrently; return the app id once all started.

        Raises:
            SchedulerClosedError: the scheduler is not entered (``async with``) or closed.
            UnsafeLogPathError: a log path is a link or not this user's; nothing started.
            InvalidLogDirError: a log directory could not be created; nothing started.
            OSError: a replica could not be started; the replicas already started are killed.
        """
        if self._task_group is None or self._closed:
            raise SchedulerClosedError(
                f"the {self.backend} scheduler is not running: use it as"
                f" `async with create_scheduler(...) as scheduler:` (or through a Runner)"
                " before submitting apps"
            )
        request = dryrun_info.request
        validate_app_id(request.app_id)
        root = os.path.dirname(os.path.dirname(request.log_dir))
        create_log_dirs(root, [d for dirs in request.role_log_dirs.values() for d in dirs])
        submitted = dryrun_info._app
        roles = list(submitted.roles) if submitted else []
        app = LocalApp(request, roles, self._records, submitted.name if submitted else "")
        self._start_recording(app)
        use_pidfd_child_watcher()
        await self._task_group.start(self._supervise, app)
        return request.app_id

    def _start_recording(self, app: LocalApp) -> None:
        """Remove a stale cancel request of ``app``; start the record writer and request watch."""
        directory = self._records.directory
        if directory is None or app.cancel_request is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(app.cancel_request)
        if not self._recording and self._task_group is not None:
            self._recording = True
            self._task_group.start_soon(self._records.run)
            self._task_group.start_soon(self._watch_cancel_requests, directory)

    async def _watch_cancel_requests(self, directory: str) -> None:
        """Cancel a running app once another process left its cancel request."""
        with ChangeWatch([os.path.join(directory, "cancel")]) as watch:
            while True:
                for app in list(self._running.values()):
                    app.adopt_cancel_request()
                await watch.wait()

    async def _supervise(
        self, app: LocalApp, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run ``app``, then keep it among the finished apps, at most ``cache_size`` of them."""
        app_id = app.record.app_id
        self._finished.pop(app_id, None)  # the same dry run scheduled again
        self._running[app_id] = app
        try:
            await supervise(app, task_status=task_status)
        finally:
            if self._running.get(app_id) is app:
                del self._running[app_id]
                if is_terminal(app.record.state):
                    self._finished[app_id] = app
            while len(self._finished) > self._cache_size:
                self._remove_temporary_logs(self._finished.pop(next(iter(self._finished))))

    def _remove_temporary_logs(self, app: LocalApp) -> None:
        """Move ``app``'s temporary log directory aside and remove it in a task."""
        temporary = self._temp_log_dir
        log_dir = app.request.log_dir
        if temporary is None or not log_dir.startswith(temporary + os.sep):
            return
        try:
            aside = tempfile.mkdtemp(prefix=".evicted-", dir=temporary)
            os.rename(log_dir, os.path.join(aside, "logs"))
        except OSError:
            shutil.rmtree(log_dir, ignore_errors=True)
            return
        if self._task_group is not None:
            self._task_group.start_soon(_remove_tree, aside)

    def _view(self, app_id: str) -> AppView | None:
        """The app kept by this scheduler, else recorded by another process; None when neither."""
        validate_app_id(app_id)
        app = self._running.get(app_id) or self._finished.get(app_id)
        return LiveApp(app) if app is not None else read_recorded_app(self.backend, app_id)

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe an app this scheduler keeps or another process of this user recorded; None
        if unknown. A failed app's error is its earliest failed replica's (TorchX's rule).

        Args:
            app_id: the app's id.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid app id.
        """
        view = self._view(app_id)
        return None if view is None else view.describe()

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """List the apps this scheduler keeps, then its session's that other processes recorded."""
        kept = {**self._running, **self._finished}
        listed = [list_response(i, app.record.state, app.record) for i, app in kept.items()]
        return listed + list_recorded_apps(self.backend, self.session_name, kept)

    async def _wait_until(
        self, app_id: str, done: Callable[[DescribeAppResponse], bool], timeout: float | None
    ) -> DescribeAppResponse | None:
        """Await the app's description until ``done`` holds; return it, None if unknown."""
        view = self._view(app_id)
        if view is None:
            return None
        with anyio.fail_after(timeout):
            await view.wait_until(done)
        return view.describe()

    async def _cancel_existing(self, app_id: str) -> None:
        view = self._view(app_id)
        if view is not None:
            await view.cancel()

    def _log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        """The log lines of the replica ``query`` names; a block's position is its byte offset."""
        view = self._view(app_id)
        if view is None:
            raise UnknownAppException(make_app_handle(self.backend, self.session_name, app_id))
        return view.log_blocks(query, start)


#: One worker thread at a time removes log trees (benchmark 4 counts the driver's threads).
_REMOVER = anyio.lowlevel.RunVar[anyio.CapacityLimiter]("asynctorchx_log_remover")


async def _remove_tree(path: str) -> None:
    """Remove ``path`` and everything in it, off the event loop."""
    limiter = _REMOVER.get(None)
    if limiter is None:
        limiter = anyio.CapacityLimiter(1)
        _REMOVER.set(limiter)
    remove = functools.partial(shutil.rmtree, path, ignore_errors=True)
    await anyio.to_thread.run_sync(remove, limiter=limiter)


__all__ = ["LocalScheduler"]
