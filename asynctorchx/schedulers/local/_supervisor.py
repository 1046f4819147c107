"""Running the replicas of a local app: start, output, exit, restart, terminate."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import resource
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping

import anyio
import anyio.abc
import anyio.lowlevel

from asynctorchx.schedulers.local import _parent_death, _subreaper
from asynctorchx.schedulers.local._errors import OpenFileLimitError, ReplicaLaunchError
from asynctorchx.schedulers.local._log_files import ReplicaLogWriter
from asynctorchx.schedulers.local._process_identity import ProcessIdentity, this_process
from asynctorchx.schedulers.local._records import (
    AppRecord,
    RecordKeeper,
    ReplicaRecord,
    cancel_request_path,
)
from asynctorchx.schedulers.local._request import PopenRequest, ReplicaParam
from asynctorchx.schedulers.toolkit import Notifier, app_state
from asynctorchx.specs.api import AppState, RetryPolicy, Role, is_terminal

logger = logging.getLogger(__name__)

#: Seconds to wait for the output pipes to close once a replica's group was killed
#: (only a process that left the group with ``setsid`` can hold them open longer).
_DRAIN_TIMEOUT = 5.0

#: One event loop's lane for starting processes (see :func:`_start_lane`).
_START_LANE: anyio.lowlevel.RunVar[anyio.Lock] = anyio.lowlevel.RunVar(
    "asynctorchx_replica_start_lane"
)


def _start_lane() -> anyio.Lock:
    """The lock every replica start of this event loop takes: one ``fork``/``exec`` at a time."""
    lane = _START_LANE.get(None)
    if lane is None:
        lane = anyio.Lock(fast_acquire=True)  # no extra yield when no start is in flight
        _START_LANE.set(lane)
    return lane


class LocalReplica:
    """One replica of a live app: its record, and what runs it (its process, its output)."""

    def __init__(self, record: ReplicaRecord, param: ReplicaParam) -> None:
        self.record = record
        self.param = param
        self.token = ""
        self.swept = self.group_ended = False
        self.output = Notifier()
        self.exited = anyio.Event()  # set when its current attempt's process exited
        self.launched = anyio.Event()  # set once its first attempt started (or was cancelled)
        self.terminate_requested = False
        #: serves a terminate request while its process runs (see _pump_until_exit)
        self.on_terminate: Callable[[], object] | None = None

    def request_terminate(self) -> None:
        """Ask its process to terminate (SIGTERM, ``stop_timeout``, SIGKILL); idempotent."""
        if self.terminate_requested:
            return
        self.terminate_requested = True
        if self.on_terminate is not None:
            self.on_terminate()

    @property
    def error_file(self) -> str:
        """The replica's ``TORCHELASTIC_ERROR_FILE``."""
        return os.path.join(self.record.log_dir, "error.json")


class LocalApp:
    """A submitted app as its supervisor runs it: its one record, changed in place, and its
    replicas; ``keeper`` writes the record."""

    def __init__(
        self, request: PopenRequest, roles: list[Role], keeper: RecordKeeper, name: str = ""
    ) -> None:
        self.request = request
        self.keeper = keeper
        #: every replica of every role, in role order
        self.replicas = [
            LocalReplica(
                ReplicaRecord(role_name, k, AppState.PENDING, request.role_log_dirs[role_name][k]),
                param,
            )
            for role_name, params in request.role_params.items()
            for k, param in enumerate(params)
        ]
        self.record = AppRecord(
            app_id=request.app_id,
            backend=keeper.backend,
            session=keeper.session,
            uid=os.geteuid(),
            state=AppState.SUBMITTED,
            log_dir=request.log_dir,
            supervisor=this_process(),
            replicas=[replica.record for replica in self.replicas],
            roles=roles,
            stop_timeout=request.stop_timeout,
            name=name,
            submitted=time.time(),
        )
        self.restart_requested = False
        self.start_error: OSError | None = None
        self.changed = Notifier()
        directory = keeper.directory
        #: the file whose existence is a cancel request from another process, if any
        self.cancel_request = (
            None if directory is None else cancel_request_path(directory, request.app_id)
        )
        #: this process's environment, read once for the first attempt's replicas
        #: (copying os.environ per replica: benchmark 3's ms-per-replica row); set by
        #: supervise
        self.environment: Mapping[str, str] = os.environ

    async def all_launched(self) -> None:
        """Return once the first attempt of every replica started (or was cancelled)."""
        for replica in self.replicas:
            await replica.launched.wait()

    def notify_changed(self) -> None:
        """Tell the keeper (its record is written soon) and wake the app's waiters."""
        if self.record.state != AppState.SUBMITTED:
            self.keeper.changed(self.record)
        self.changed.notify()

    def set_state(self, state: AppState) -> None:
        """Set the app's state; its record is written at once (its start, its end); wake its waiters
        (and, once terminal, its log followers)."""
        self.record.state = state
        if is_terminal(state):
            self.record.ended = time.time()
            self.keeper.ended(self.record)
            for replica in self.replicas:
                replica.output.notify()
        else:
            self.keeper.write_now(self.record)
        self.changed.notify()

    def request_cancel(self) -> None:
        """Ask every replica to terminate (SIGTERM, ``stop_timeout``, SIGKILL); idempotent."""
        if is_terminal(self.record.state) or self.record.cancelled:
            return
        self.record.cancelled = True
        for replica in self.replicas:
            replica.request_terminate()
        self.notify_changed()

    def adopt_cancel_request(self) -> None:
        """Cancel the app if another process asked to (its cancel request file exists)."""
        request = self.cancel_request
        if not self.record.cancelled and request and os.path.lexists(request):
            self.request_cancel()


async def supervise(
    app: LocalApp, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Run the app's replicas to the end, restarting them as their retry policy says."""
    raise_open_file_limit()
    _subreaper.enable()
    app.environment = dict(os.environ)
    started = False
    try:
        with anyio.CancelScope(shield=True):
            while True:
                app.restart_requested = False
                async with anyio.create_task_group() as task_group:
                    for replica in app.replicas:
                        on_started = None if started else replica.launched.set
                        task_group.start_soon(
                            _run_replica, app, replica, on_started, task_group.cancel_scope
                        )
                    if not started:
                        await app.all_launched()
                        app.set_state(AppState.RUNNING)
                        task_status.started()
                        started = True
                if app.start_error is not None:
                    raise app.start_error
                if not app.restart_requested or app.record.cancelled:
                    break
                app.record.num_restarts += 1
                logger.info(
                    "%s: restarting every replica (APPLICATION retry policy)", app.request.app_id
                )
                for replica in app.replicas:
                    replica.record.state = AppState.PENDING
                app.notify_changed()
    except BaseException as error:
        # a bug here, KeyboardInterrupt, or a native task.cancel() that no shield stops:
        # the replicas were killed on the way out, and no waiter may hang on the app
        if not started:
            raise
        interrupted = not isinstance(error, Exception)
        for replica in app.replicas:
            if not is_terminal(replica.record.state):
                replica.record.state = AppState.FAILED
        app.set_state(
            AppState.CANCELLED if interrupted and app.record.cancelled else AppState.FAILED
        )
        if interrupted:
            raise
        logger.exception("%s: supervising the app failed", app.request.app_id)
        return
    app.set_state(app_state((r.record.state for r in app.replicas), cancelled=app.record.cancelled))


async def _run_replica(
    app: LocalApp,
    replica: LocalReplica,
    on_started: Callable[[], None] | None,
    attempt_scope: anyio.CancelScope,
) -> None:
    """Run one replica, restarting it while its REPLICA retry policy allows."""
    role_name = replica.record.role
    max_retries = app.request.max_retries.get(role_name, 0)
    policy = app.request.retry_policies.get(role_name, RetryPolicy.APPLICATION)
    while True:
        if app.record.cancelled:
            replica.record.state = AppState.CANCELLED
            if on_started is not None:
                on_started()
            return
        try:
            await _run_process(app, replica, on_started)
        except OSError as error:  # the first attempt could not start: fail the start
            if app.start_error is None:
                app.start_error = start_error(app.request.app_id, error)
            attempt_scope.cancel()
            return
        on_started = None  # a restart is not the first attempt
        app.notify_changed()
        if replica.record.state != AppState.FAILED or app.record.cancelled or app.restart_requested:
            return
        if policy == RetryPolicy.REPLICA and replica.record.restarts < max_retries:
            replica.record.restarts += 1
            logger.info(
                "%s: restarting %s/%d (%d of %d)",
                app.request.app_id,
                role_name,
                replica.record.replica_id,
                replica.record.restarts,
                max_retries,
            )
            continue
        if policy == RetryPolicy.APPLICATION and app.record.num_restarts < max_retries:
            app.restart_requested = True
            for other in app.replicas:
                if other is not replica:
                    other.request_terminate()
        return


async def _run_process(
    app: LocalApp,
    replica: LocalReplica,
    on_started: Callable[[], None] | None,
) -> None:
    """Start the replica's process, pump its output to the logs, await its exit."""
    record = replica.record
    replica.terminate_requested = False  # a cancelled app's replica never gets here
    replica.exited = anyio.Event()
    record.exit_code = record.error = None
    if record.restarts or app.record.num_restarts:  # the last attempt's error file aside
        with contextlib.suppress(FileNotFoundError):
            os.replace(replica.error_file, f"{replica.error_file}.{int(time.time() * 1000)}")
    writer = ReplicaLogWriter(record.log_dir, replica.output.notify)
    replica.token = secrets.token_hex(16)
    replica.swept = replica.group_ended = False
    # the first attempt's replicas share one read of os.environ; a restart reads it again
    environment = app.environment if on_started is not None else os.environ
    env = {**environment, **replica.param.env, _subreaper.TOKEN_VARIABLE: replica.token}
    try:
        process = await _open_process(replica, writer, env, first=on_started is not None)
        if process is None:
            record.state = AppState.FAILED
            record.exit_code = 127
            return
        record.pid = record.pgid = process.pid
        record.started, record.ended = time.time(), None
        running = process.returncode is None  # not reaped: its pid is still this child's
        record.process = ProcessIdentity.of(process.pid, os.getpid()) if running else None
        _subreaper.OWN_CHILDREN.add(process.pid)
        record.state = AppState.RUNNING
        app.notify_changed()
        if on_started is not None:
            on_started()
        try:
            returncode, state = await _pump_until_exit(app, replica, process, writer)
        finally:
            await _reap(process, "" if replica.swept else replica.token, replica.group_ended)
        record.exit_code, record.ended = returncode, time.time()
        record.state = state
        record.error = read_error_file(replica.error_file)
        if writer.error is not None and state == AppState.SUCCEEDED:
            # output that never reached the logs is not a success (e.g. no fd left)
            logger.error(
                "%s: output of %s/%d was lost: %s",
                app.request.app_id,
                record.role,
                record.replica_id,
                writer.error,
            )
            record.state = AppState.FAILED
    finally:
        writer.close()
        replica.exited.set()


async def _open_process(
    replica: LocalReplica, writer: ReplicaLogWriter, env: dict[str, str], *, first: bool
) -> anyio.abc.Process | None:
    """Start the replica's process in a session of its own; None when a restart could not (the
    reason goes to its stderr log)."""
    param = replica.param
    try:
        async with _start_lane():
            process = await anyio.open_process(
                param.args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=param.cwd,
                env=env,
                start_new_session=True,
            )
            if process.returncode is None:  # its own session: its group is its pid
                _parent_death.tie(process.pid, env[_subreaper.TOKEN_VARIABLE])
            return process
    except OSError as error:
        typed = launch_error(replica, env, error)
        if first and typed is error:
            raise
        if first:
            raise typed from error
        writer.write("stderr", f"asynctorchx: {typed}\n".encode())
        return None


async def _pump_until_exit(
    app: LocalApp, replica: LocalReplica, process: anyio.abc.Process, writer: ReplicaLogWriter
) -> tuple[int, AppState]:
    """Pump the process's output into its logs until it exited; end the rest of its group and tree,
    and wait (a while) for its pipes to be drained; return its exit code and the attempt's state."""
    assert process.stdout is not None
    assert process.stderr is not None
    async with anyio.create_task_group() as pumps:
        drained = [anyio.Event(), anyio.Event()]
        pumps.start_soon(_pump, process.stdout, "stdout", writer, drained[0])
        pumps.start_soon(_pump, process.stderr, "stderr", writer, drained[1])
        terminate = functools.partial(pumps.start_soon, _terminator, app, replica, drained)
        if replica.terminate_requested:
            terminate()
        else:
            replica.on_terminate = terminate
        try:
            returncode = await process.wait()
            app.adopt_cancel_request()
            if app.record.cancelled or (app.restart_requested and replica.terminate_requested):
                state = AppState.CANCELLED
            else:
                state = AppState.SUCCEEDED if returncode == 0 else AppState.FAILED
            replica.exited.set()
            # the main process is gone: so is the rest of its group, unless a
            # cancel gives it the rest of its grace period (see _terminator)
            if not replica.terminate_requested:  # an ended group is not signalled again
                replica.group_ended = not signal_group(process.pid, signal.SIGKILL)
                # daemons that left the group may hold the pipes: end them first
                with anyio.CancelScope(shield=True):
                    await _subreaper.end_descendants(replica.token, process.pid)
                replica.swept = True
            if not all(event.is_set() for event in drained):
                grace = app.request.stop_timeout if replica.terminate_requested else 0
                with anyio.move_on_after(_DRAIN_TIMEOUT + grace):
                    for event in drained:
                        await event.wait()
        finally:
            replica.on_terminate = None
        # a terminator still waiting, a pump of a pipe that a stray process holds open
        pumps.cancel_scope.cancel()
    return returncode, state  # what is left of its group is killed by _reap, next


async def _reap(process: anyio.abc.Process, token: str, group_ended: bool) -> None:
    """Reap the process, killing its group first if it still runs (cancelled from outside), then the
    rest of its group (unless ``group_ended``: found empty) and of its tree, daemons included
    (:mod:`._subreaper`), unless ``token`` is "" (swept)."""
    with anyio.CancelScope(shield=True):
        try:
            if process.returncode is None:
                signal_group(process.pid, signal.SIGKILL)
                await process.wait()
            await process.aclose()
        finally:
            _subreaper.OWN_CHILDREN.discard(process.pid)
            _parent_death.untie(process.pid)  # reaped: its pid may be reused from now on
        if not group_ended:
            signal_group(process.pid, signal.SIGKILL)
        if token:  # "" when its tree was already swept after its exit
            await _subreaper.end_descendants(token, process.pid)


async def _terminator(app: LocalApp, replica: LocalReplica, drained: list[anyio.Event]) -> None:
    """On a terminate request (started by it): SIGTERM the group, wait ``stop_timeout``, SIGKILL
    it."""
    signal_group(replica.record.pid, signal.SIGTERM)
    if replica.record.pid is not None:
        _subreaper.signal_descendants(replica.token, replica.record.pid, signal.SIGTERM)
    with anyio.move_on_after(app.request.stop_timeout):
        await replica.exited.wait()
        # the leader exited; its group had the same SIGTERM: wait for the pipes to close
        for event in drained:
            await event.wait()
    signal_group(replica.record.pid, signal.SIGKILL)


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


def signal_group(pid: int | None, signum: int) -> bool:
    """Send ``signum`` to the process group led by ``pid``; return False when the group is empty
    (``ESRCH``: it can never get members again) or ``pid`` is None."""
    if pid is None:
        return False
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member this user cannot signal: the group still exists
        pass
    return True


def read_error_file(path: str) -> str | None:
    """The text of the TorchElastic error file at ``path``; None if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as error_file:
            return error_file.read()
    except OSError:
        return None


@functools.cache
def raise_open_file_limit() -> None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (at most 2**20), once; never raises."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError) as error:
        logger.debug("could not raise the open-file limit: %s", error)


def start_error(app_id: str, error: OSError) -> OSError:
    """The error a failed first start of ``app_id`` raises: ``error`` itself, or, when this process
    ran out of file descriptors (``EMFILE``, ``ENFILE``), an
    :class:`~asynctorchx.errors.OpenFileLimitError` caused by it."""
    if error.errno in (errno.EMFILE, errno.ENFILE):
        typed = OpenFileLimitError(error.errno, app_id, str(error))
        typed.__cause__ = error
        return typed
    return error


_INTERPRETER_FIX = (
    "or make the entrypoint its interpreter and the file its first argument"
    " (entrypoint 'sh' or 'python3', args [file, ...])"
)


def launch_error(replica: LocalReplica, env: Mapping[str, str], error: OSError) -> OSError:
    """The :class:`~asynctorchx.errors.ReplicaLaunchError` of a replica that could not start (a
    missing or unrunnable entrypoint, a missing working directory), else ``error``."""
    cwd = replica.param.cwd
    entrypoint, where = replica.param.args[0], cwd or os.getcwd()
    search = os.get_exec_path(dict(env))
    if "/" in entrypoint:  # a path, relative to the working directory
        found: str | None = os.path.join(where, entrypoint)
    else:
        found = shutil.which(entrypoint, mode=os.F_OK, path=os.pathsep.join(search))
    found = found if found is not None and os.path.exists(found) else None

    typed = functools.partial(
        ReplicaLaunchError,
        error.errno or 0,
        replica.record.role,
        replica.record.replica_id,
        entrypoint,
    )

    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        if cwd is not None and error.filename == cwd:
            return typed(
                f"its working directory {cwd!r} does not exist", "create it, or fix the image"
            )
        if "/" in entrypoint:
            return typed(
                f"there is no file {os.path.join(where, entrypoint)!r}",
                "fix the role's entrypoint, or create that file",
            )
        return typed(
            f"no program of that name on the replica's PATH {os.pathsep.join(search)!r}",
            "install it, give the entrypoint as an absolute path, or put its directory on"
            " the role's PATH (Role.env)",
        )
    if error.errno == errno.EACCES and found is not None:
        mode = "a directory" if os.path.isdir(found) else f"mode {os.stat(found).st_mode:o}"
        return typed(
            f"{found!r} is not executable ({mode})",
            f"make it executable (`chmod +x {found}`), {_INTERPRETER_FIX}",
        )
    if error.errno == errno.ENOEXEC:
        shown = found if found is not None else entrypoint
        return typed(
            f"{shown!r} is executable but not a program this machine can run (no '#!' line,"
            " or built for another machine)",
            "begin it with a '#!' line naming its interpreter (e.g. '#!/bin/sh'), "
            + _INTERPRETER_FIX,
        )
    return error
