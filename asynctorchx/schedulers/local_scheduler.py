"""The ``local_cwd`` and ``local_dir`` schedulers: replicas as real processes on this host.

Seed ``004`` (TorchX's ``torchx.schedulers.local_scheduler``), made awaitable and made
to do what TorchX's leaves out:

* every replica is started with :func:`anyio.open_process` in a session of its own, so
  its whole process tree can be signalled; all replicas of an app start concurrently;
* ``wait`` is an await on process exit, and ``log_iter`` followers are woken by new
  output (no polling anywhere between an exit or a line and the caller);
* ``cancel`` sends SIGTERM to each replica's process group, waits ``stop_timeout``
  seconds, then SIGKILLs the group; when a replica's main process exits, what is left
  of its group is killed, as a container's processes die with its PID 1;
* ``max_retries`` with ``RetryPolicy.REPLICA`` or ``APPLICATION`` is honoured;
* ``since``/``until`` are honoured by ``log_iter``; the temporary log directory is
  removed when the scheduler closes.

A ``LocalScheduler`` hosts its replicas in a task group, so it must be entered:
``async with create_cwd_scheduler("session") as scheduler:``. Leaving the block (or
``close()``) terminates what still runs. While entered in the main thread of an
asyncio or trio program whose SIGTERM handler is the default, a SIGTERM to this
process terminates every replica before the process exits.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from asynctorchx.errors import SchedulerClosedError, UnknownAppException
from asynctorchx.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    validate_app_id,
)
from asynctorchx.schedulers.local._child_watcher import use_pidfd_child_watcher
from asynctorchx.schedulers.local._log_files import Notifier, ReplicaLogWriter, read_log_lines
from asynctorchx.schedulers.local._process_groups import process_wide_groups, signal_group
from asynctorchx.schedulers.local._request import (
    DEFAULT_STOP_TIMEOUT,
    CWDImageProvider,
    ImageProvider,
    LocalDirectoryImageProvider,
    PopenRequest,
    ReplicaParam,
    RequestContext,
    build_popen_request,
    local_run_opts,
    new_app_id,
)
from asynctorchx.schedulers.local._signals import sigterm_is_default, terminate_replicas_on_sigterm
from asynctorchx.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    RetryPolicy,
    RoleStatus,
    is_terminal,
    make_app_handle,
    runopts,
)

logger = logging.getLogger(__name__)

#: Seconds to wait for the output pipes to close once a replica's group was killed
#: (only a process that left the group with ``setsid`` can hold them open longer).
_DRAIN_TIMEOUT = 5.0


# --------------------------------------------------------------------------- live state


class _Replica:
    """One replica of a live app: its process, its logs, its state."""

    def __init__(self, role_name: str, replica_id: int, param: ReplicaParam, log_dir: str) -> None:
        self.role_name = role_name
        self.replica_id = replica_id
        self.param = param
        self.log_dir = log_dir
        self.state = AppState.PENDING
        self.exit_code: int | None = None
        self.restarts = 0
        self.pid: int | None = None
        self.output = Notifier()
        self.exited: anyio.Event | None = None
        self.terminate_requested: anyio.Event = anyio.Event()

    @property
    def error_file(self) -> str:
        return os.path.join(self.log_dir, "error.json")


class _App:
    """A submitted app and what its supervisor knows of it."""

    def __init__(self, request: PopenRequest, app: AppDef | None) -> None:
        self.request = request
        self.app = app
        self.state = AppState.SUBMITTED
        self.cancelled = False
        self.restart_requested = False
        self.start_error: OSError | None = None
        self.num_restarts = 0
        self.last_updated = time.monotonic()
        self.changed = Notifier()
        self.replicas: dict[str, list[_Replica]] = {
            role_name: [
                _Replica(role_name, k, param, request.role_log_dirs[role_name][k])
                for k, param in enumerate(params)
            ]
            for role_name, params in request.role_params.items()
        }

    def all_replicas(self) -> list[_Replica]:
        return [replica for replicas in self.replicas.values() for replica in replicas]

    def set_state(self, state: AppState) -> None:
        self.state = state
        self.last_updated = time.monotonic()
        self.changed.notify()
        if is_terminal(state):
            for replica in self.all_replicas():
                replica.output.notify()


class _StartCounter:
    """Sets ``all_started`` once ``replica_started`` was called for every replica."""

    def __init__(self, replicas: int) -> None:
        self.waiting = replicas
        self.all_started = anyio.Event()
        if replicas == 0:
            self.all_started.set()

    def replica_started(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.all_started.set()


# --------------------------------------------------------------------------- scheduler


class LocalScheduler(Scheduler[PopenRequest]):
    """Runs each replica as a process on this host (seed 004), awaitably.

    Args:
        session_name: the runner session, part of app handles and of the log path.
        image_provider_class: builds the :class:`ImageProvider` from the run config
            (:class:`CWDImageProvider` for ``local_cwd``, :class:`LocalDirectoryImageProvider`
            for ``local_dir``).
        cache_size: how many apps are kept; when full, the least recently updated
            finished app is forgotten (its logs stay on disk). Raises ``IndexError``
            at submit when all kept apps still run (TorchX's rule).
        extra_paths: directories put in front of ``PATH`` for every replica.

    Use ``async with scheduler:``; submitting to a scheduler that is not entered raises
    :class:`~asynctorchx.errors.SchedulerClosedError`.
    """

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
        self._apps: dict[str, _App] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        self._closed = False
        self._temp_log_dir: str | None = None
        self._signal_scope: anyio.CancelScope | None = None
        self._process_groups = process_wide_groups()

    # ----------------------------------------------------------------- lifetime

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
        if sigterm_is_default():
            self._signal_scope = await task_group.start(
                terminate_replicas_on_sigterm,
                self._process_groups,
                self._longest_stop_timeout,
                self._terminate_all,
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        task_group = self._task_group
        try:
            await self.close()
        finally:
            if task_group is not None:
                task_group.cancel_scope.cancel()
                # the body's own exception is not the task group's: it propagates as
                # raised, never wrapped in an ExceptionGroup
                await task_group.__aexit__(None, None, None)
            self._task_group = None

    async def close(self) -> None:
        """Terminate every app still running, as ``cancel`` does, and wait for it.

        Then the temporary log directory (used without ``log_dir``) is removed.
        Idempotent; never raises.
        """
        if self._closed:
            return
        self._closed = True
        try:
            with anyio.CancelScope(shield=True):
                running = [app for app in self._apps.values() if not is_terminal(app.state)]
                if running:
                    async with anyio.create_task_group() as task_group:
                        for app in running:
                            task_group.start_soon(self._terminate_and_wait, app)
        except Exception:  # close never raises
            logger.exception("closing the %s scheduler", self.backend)
        finally:
            if self._signal_scope is not None:
                self._signal_scope.cancel()
            if self._temp_log_dir is not None:
                shutil.rmtree(self._temp_log_dir, ignore_errors=True)
                self._temp_log_dir = None

    async def _terminate_and_wait(self, app: _App) -> None:
        self._request_cancel(app)
        await self._wait_terminal(app)

    def _longest_stop_timeout(self) -> float:
        """The longest ``stop_timeout`` of the kept apps (seconds), for the SIGTERM handler."""
        return max(
            (app.request.stop_timeout for app in self._apps.values()),
            default=DEFAULT_STOP_TIMEOUT,
        )

    async def _terminate_all(self) -> None:
        """Cancel every kept app and await its end, one after the other."""
        for app in list(self._apps.values()):
            self._request_cancel(app)
            await self._wait_terminal(app)

    # ----------------------------------------------------------------- options

    def _run_opts(self) -> runopts:
        return local_run_opts()

    # ----------------------------------------------------------------- dry run

    def _base_log_dir(self, cfg: Mapping[str, CfgVal]) -> str:
        log_dir = cfg.get("log_dir")
        if isinstance(log_dir, str) and log_dir:
            return os.path.abspath(log_dir)
        if self._temp_log_dir is None:
            self._temp_log_dir = tempfile.mkdtemp(prefix="asynctorchx_")
        return self._temp_log_dir

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[PopenRequest]:
        app_id = new_app_id(app.name)
        context = RequestContext(
            app_id=app_id,
            app_log_dir=os.path.join(self._base_log_dir(cfg), self.session_name, app_id),
            job_id=make_app_handle(self.backend, self.session_name, app_id),
            image_provider=self._image_provider_class(cfg),
            extra_paths=tuple(self._extra_paths),
        )
        return AppDryRunInfo(build_popen_request(app, cfg, context), str)

    # ----------------------------------------------------------------- schedule

    async def schedule(self, dryrun_info: AppDryRunInfo[PopenRequest]) -> str:
        """Start every replica of the request concurrently; return the app id.

        Returns once every replica's process has started.

        Raises:
            SchedulerClosedError: the scheduler is not entered (``async with``) or closed.
            IndexError: ``cache_size`` apps are kept and none of them has finished.
            OSError: a replica could not be started (e.g. ``FileNotFoundError`` for an
                entrypoint that does not exist); the replicas already started are killed.
        """
        if self._task_group is None or self._closed:
            raise SchedulerClosedError(
                f"the {self.backend} scheduler is not running: use it as"
                f" `async with create_scheduler(...) as scheduler:` (or through a Runner)"
                " before submitting apps"
            )
        request = dryrun_info.request
        validate_app_id(request.app_id)
        if len(self._apps) >= self._cache_size and not self._evict_lru():
            raise IndexError(
                f"the {self.backend} scheduler keeps {self._cache_size} apps (cache_size) and"
                " none has finished: wait for or cancel one, or create the scheduler with a"
                " larger cache_size"
            )
        app = _App(request, dryrun_info._app)
        for replica in app.all_replicas():
            os.makedirs(replica.log_dir, exist_ok=True)
        use_pidfd_child_watcher()
        await self._task_group.start(self._supervise, app)
        return request.app_id

    def _evict_lru(self) -> bool:
        finished = [(app.last_updated, app_id) for app_id, app in self._apps.items()]
        finished = [entry for entry in finished if is_terminal(self._apps[entry[1]].state)]
        if not finished:
            return False
        del self._apps[min(finished)[1]]
        return True

    async def _supervise(
        self, app: _App, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the app's replicas to the end, restarting them as their retry policy says.

        ``task_status.started()`` is called once every replica of the first attempt has
        started; a replica that cannot start makes the whole start fail (the others are
        killed) and its error is raised to ``schedule``.

        The work runs shielded from the cancellation of the block that entered the
        scheduler: that block's exit calls :meth:`close`, which ends the replicas the
        graceful way (SIGTERM, ``stop_timeout``, SIGKILL) and waits for this task. Were
        it cancelled instead, its replicas would be SIGKILLed at once and the app would
        never reach a terminal state for ``close`` to see.
        """
        started = False
        try:
            with anyio.CancelScope(shield=True):
                while True:
                    app.restart_requested = False
                    async with anyio.create_task_group() as task_group:
                        counter = _StartCounter(len(app.all_replicas()))
                        on_started = None if started else counter.replica_started
                        for replica in app.all_replicas():
                            task_group.start_soon(
                                self._run_replica, app, replica, on_started, task_group.cancel_scope
                            )
                        if not started:
                            await counter.all_started.wait()
                            self._apps[app.request.app_id] = app
                            app.set_state(AppState.RUNNING)
                            task_status.started()
                            started = True
                    if app.start_error is not None:
                        raise app.start_error
                    if not app.restart_requested or app.cancelled:
                        break
                    app.num_restarts += 1
                    logger.info(
                        "%s: restarting every replica (APPLICATION retry policy)",
                        app.request.app_id,
                    )
                    for replica in app.all_replicas():
                        replica.state = AppState.PENDING
                    app.changed.notify()
        except Exception:
            if not started:
                raise
            logger.exception("%s: supervising the app failed", app.request.app_id)
            self._mark_unfinished_failed(app)
            app.set_state(AppState.FAILED)
            return
        except BaseException:
            # KeyboardInterrupt, or a native task.cancel() that no shield stops: the
            # replicas were killed on the way out, and no waiter may hang on the app
            if started and not is_terminal(app.state):
                self._mark_unfinished_failed(app)
                app.set_state(AppState.CANCELLED if app.cancelled else AppState.FAILED)
            raise
        app.set_state(self._final_state(app))

    @staticmethod
    def _mark_unfinished_failed(app: _App) -> None:
        for replica in app.all_replicas():
            if not is_terminal(replica.state):
                replica.state = AppState.FAILED

    @staticmethod
    def _final_state(app: _App) -> AppState:
        if app.cancelled:
            return AppState.CANCELLED
        if any(replica.state == AppState.FAILED for replica in app.all_replicas()):
            return AppState.FAILED
        return AppState.SUCCEEDED

    async def _run_replica(
        self,
        app: _App,
        replica: _Replica,
        on_started: Callable[[], None] | None,
        attempt_scope: anyio.CancelScope,
    ) -> None:
        """Run one replica, restarting it while its REPLICA retry policy allows.

        ``on_started`` is called once its first process started (first attempt only).
        """
        role_name = replica.role_name
        max_retries = app.request.max_retries.get(role_name, 0)
        policy = app.request.retry_policies.get(role_name, RetryPolicy.APPLICATION)
        first = True
        while True:
            if app.cancelled:
                replica.state = AppState.CANCELLED
                if first and on_started is not None:
                    on_started()
                return
            try:
                await self._run_process(app, replica, on_started if first else None)
            except OSError as error:  # the first attempt could not start: fail the start
                app.start_error = error
                attempt_scope.cancel()
                return
            first = False
            app.changed.notify()
            if replica.state != AppState.FAILED or app.cancelled or app.restart_requested:
                return
            if policy == RetryPolicy.REPLICA and replica.restarts < max_retries:
                replica.restarts += 1
                logger.info(
                    "%s: restarting %s/%d (%d of %d)",
                    app.request.app_id,
                    role_name,
                    replica.replica_id,
                    replica.restarts,
                    max_retries,
                )
                continue
            if policy == RetryPolicy.APPLICATION and app.num_restarts < max_retries:
                app.restart_requested = True
                for other in app.all_replicas():
                    if other is not replica:
                        other.terminate_requested.set()
            return

    async def _run_process(
        self,
        app: _App,
        replica: _Replica,
        on_started: Callable[[], None] | None,
    ) -> None:
        """Start the replica's process, pump its output to the logs, await its exit.

        Raises:
            OSError: the process of a first attempt (``on_started`` given) could not start.
        """
        param = replica.param
        replica.terminate_requested = anyio.Event()
        if app.cancelled:
            replica.terminate_requested.set()
        replica.exited = anyio.Event()
        replica.exit_code = None
        if replica.restarts or app.num_restarts:
            _keep_error_file(replica)
        env = dict(os.environ)
        env.update(param.env)
        writer = ReplicaLogWriter(replica.log_dir, replica.output.notify)
        try:
            try:
                process = await anyio.open_process(
                    param.args,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=param.cwd,
                    env=env,
                    start_new_session=True,
                )
            except OSError as error:
                if on_started is not None:
                    raise
                writer.write(
                    "stderr", f"asynctorchx: could not start {param.args[0]!r}: {error}\n".encode()
                )
                replica.state = AppState.FAILED
                replica.exit_code = 127
                return
            replica.pid = process.pid
            self._process_groups.add(process.pid)
            replica.state = AppState.RUNNING
            if on_started is not None:
                on_started()
            try:
                async with anyio.create_task_group() as pumps:
                    drained = [anyio.Event(), anyio.Event()]
                    assert process.stdout is not None
                    assert process.stderr is not None
                    pumps.start_soon(_pump, process.stdout, "stdout", writer, drained[0])
                    pumps.start_soon(_pump, process.stderr, "stderr", writer, drained[1])
                    pumps.start_soon(self._terminator, app, replica, drained)
                    returncode = await process.wait()
                    replica.exited.set()
                    # the main process is gone: so is the rest of its group, unless a
                    # cancel gives it the rest of its grace period (see _terminator)
                    if not replica.terminate_requested.is_set():
                        signal_group(process.pid, signal.SIGKILL)
                    grace = app.request.stop_timeout if replica.terminate_requested.is_set() else 0
                    with anyio.move_on_after(_DRAIN_TIMEOUT + grace):
                        for event in drained:
                            await event.wait()
                    signal_group(process.pid, signal.SIGKILL)
                    pumps.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    if process.returncode is None:  # cancelled from outside: kill, then reap
                        signal_group(process.pid, signal.SIGKILL)
                        await process.wait()
                    await process.aclose()
                self._process_groups.discard(process.pid)
            replica.exit_code = returncode
            if app.cancelled or (app.restart_requested and replica.terminate_requested.is_set()):
                replica.state = AppState.CANCELLED
            elif returncode == 0:
                replica.state = AppState.SUCCEEDED
            else:
                replica.state = AppState.FAILED
        finally:
            writer.close()
            if replica.exited is not None:
                replica.exited.set()

    async def _terminator(self, app: _App, replica: _Replica, drained: list[anyio.Event]) -> None:
        """On a terminate request: SIGTERM the group, wait ``stop_timeout``, SIGKILL it."""
        await replica.terminate_requested.wait()
        signal_group(replica.pid, signal.SIGTERM)
        with anyio.move_on_after(app.request.stop_timeout):
            assert replica.exited is not None
            await replica.exited.wait()
            # the leader exited; its group had the same SIGTERM: wait for the pipes to close
            for event in drained:
                await event.wait()
        signal_group(replica.pid, signal.SIGKILL)

    # ----------------------------------------------------------------- queries

    def _get(self, app_id: str) -> _App | None:
        validate_app_id(app_id)
        return self._apps.get(app_id)

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the app, or return None if this scheduler does not keep it.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid app id.
        """
        app = self._get(app_id)
        if app is None:
            return None
        roles_statuses = [
            RoleStatus(
                role_name,
                [
                    ReplicaStatus(
                        id=replica.replica_id,
                        state=replica.state,
                        role=role_name,
                        hostname="localhost",
                        structured_error_msg=_read_error_file(replica.error_file),
                        exit_code=replica.exit_code,
                    )
                    for replica in replicas
                ],
            )
            for role_name, replicas in app.replicas.items()
        ]
        num_restarts = app.num_restarts + sum(r.restarts for r in app.all_replicas())
        return DescribeAppResponse(
            app_id=app_id,
            state=app.state,
            num_restarts=num_restarts,
            msg="cancelled" if app.cancelled else NONE,
            structured_error_msg=_earliest_error(app) if app.state == AppState.FAILED else NONE,
            ui_url=f"file://{app.request.log_dir}",
            roles_statuses=roles_statuses,
            roles=list(app.app.roles) if app.app is not None else [],
        )

    async def list(self) -> list[ListAppResponse]:
        """List the apps this scheduler keeps (at most ``cache_size``)."""
        return [
            ListAppResponse(app_id=app_id, state=app.state) for app_id, app in self._apps.items()
        ]

    async def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        """Await the app's terminal state (an await on its processes' exit, no polling).

        Returns its description then, or None for an unknown app. Every log line is
        written before this returns. Cancelling the awaiting task stops only the wait.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
            InvalidAppIdException: ``app_id`` is not a valid app id.
        """
        app = self._get(app_id)
        if app is None:
            return None
        with anyio.fail_after(timeout):
            await self._wait_terminal(app)
        return await self.describe(app_id)

    async def wait_for_state_change(
        self, app_id: str, state: AppState, timeout: float | None = None
    ) -> DescribeAppResponse | None:
        """Await the app's next change away from ``state`` (an event, no polling).

        See :meth:`Scheduler.wait_for_state_change`.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
            InvalidAppIdException: ``app_id`` is not a valid app id.
        """
        app = self._get(app_id)
        if app is None:
            return None
        with anyio.fail_after(timeout):
            await self._wait_until(app, lambda: app.state != state or is_terminal(app.state))
        return await self.describe(app_id)

    @staticmethod
    async def _wait_until(app: _App, done: Callable[[], bool]) -> None:
        """Await ``app.changed`` until ``done()`` holds (the event is taken before the
        check, so a change between the check and the await is never missed)."""
        while True:
            event = app.changed.event
            if done():
                return
            await event.wait()

    @classmethod
    async def _wait_terminal(cls, app: _App) -> None:
        await cls._wait_until(app, lambda: is_terminal(app.state))

    async def _cancel_existing(self, app_id: str) -> None:
        app = self._apps[app_id]
        self._request_cancel(app)

    @staticmethod
    def _request_cancel(app: _App) -> None:
        if is_terminal(app.state) or app.cancelled:
            return
        app.cancelled = True
        for replica in app.all_replicas():
            replica.terminate_requested.set()
        app.changed.notify()

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
        """Iterate over the log lines of replica ``k`` of ``role_name``, as they come.

        See :meth:`Scheduler.log_iter`. Lines keep their ``\\n``; invalid UTF-8 becomes
        U+FFFD; a follower (``should_tail=True``) is woken by new output and ends once
        the app is terminal and every line was yielded. Retries append to the same files.

        Raises:
            UnknownAppException: the scheduler does not keep the app.
            ValueError: there is no such role or replica, or ``streams`` is not a Stream.
            InvalidAppIdException: ``app_id`` is not a valid app id.
        """
        app = self._get(app_id)
        if app is None:
            raise UnknownAppException(make_app_handle(self.backend, self.session_name, app_id))
        replicas = app.replicas.get(role_name)
        if replicas is None:
            raise ValueError(
                f"app {app_id!r} has no role {role_name!r}; its roles: {', '.join(app.replicas)}"
            )
        if not 0 <= k < len(replicas):
            raise ValueError(
                f"role {role_name!r} of app {app_id!r} has replicas 0..{len(replicas) - 1}, not {k}"
            )
        stream = Stream(streams) if streams is not None else Stream.COMBINED
        replica = replicas[k]
        path = os.path.join(replica.log_dir, f"{stream.value}.log")
        return read_log_lines(
            path,
            wake=lambda: replica.output.event,
            is_finished=lambda: is_terminal(app.state),
            should_tail=should_tail,
            regex=regex,
            since=since,
            until=until,
        )


async def _pump(
    stream: anyio.abc.ByteReceiveStream, name: str, writer: ReplicaLogWriter, drained: anyio.Event
) -> None:
    """Copy a replica's pipe into its log files until end of file."""
    try:
        async for chunk in stream:
            writer.write(name, chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        writer.finish(name)
        drained.set()


def _keep_error_file(replica: _Replica) -> None:
    """Move a previous attempt's error file aside so the new attempt starts clean."""
    if os.path.exists(replica.error_file):
        os.replace(replica.error_file, f"{replica.error_file}.{int(time.time() * 1000)}")


def _read_error_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as error_file:
            return error_file.read()
    except OSError:
        return NONE


def _error_timestamp(text: str) -> float:
    try:
        return float(json.loads(text)["message"]["extraInfo"]["timestamp"])
    except (ValueError, KeyError, TypeError):
        return float("inf")


def _earliest_error(app: _App) -> str:
    """The earliest TorchElastic error file of the app's failed replicas (TorchX's rule)."""
    errors = [
        _read_error_file(replica.error_file)
        for replica in app.all_replicas()
        if replica.state == AppState.FAILED
    ]
    errors = [text for text in errors if text != NONE]
    return min(errors, key=_error_timestamp) if errors else NONE


def create_cwd_scheduler(session_name: str, **kwargs: Any) -> LocalScheduler:
    """Create the ``local_cwd`` scheduler: replicas run in the current directory.

    Args:
        session_name: the runner session.
        **kwargs: passed to :class:`LocalScheduler` (``cache_size``, ``extra_paths``).
    """
    return LocalScheduler(
        session_name, image_provider_class=CWDImageProvider, backend="local_cwd", **_known(kwargs)
    )


def create_dir_scheduler(session_name: str, **kwargs: Any) -> LocalScheduler:
    """Create the ``local_dir`` scheduler: a role's image is an absolute directory to run in.

    Args:
        session_name: the runner session.
        **kwargs: passed to :class:`LocalScheduler` (``cache_size``, ``extra_paths``).
    """
    return LocalScheduler(
        session_name,
        image_provider_class=LocalDirectoryImageProvider,
        backend="local_dir",
        **_known(kwargs),
    )


def _known(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Keep the keyword arguments LocalScheduler takes (the runner passes every
    ``TORCHX_*`` parameter to every factory, as TorchX does)."""
    known = {"cache_size", "extra_paths"}
    params = {key: value for key, value in kwargs.items() if key in known}
    if "cache_size" in params:
        params["cache_size"] = int(params["cache_size"])
    return params


__all__ = [
    "CWDImageProvider",
    "ImageProvider",
    "LocalDirectoryImageProvider",
    "LocalScheduler",
    "PopenRequest",
    "ReplicaParam",
    "create_cwd_scheduler",
    "create_dir_scheduler",
]
