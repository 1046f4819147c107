"""One view of a local app, whether this process supervises it or another one recorded it."""

from __future__ import annotations

import abc
import contextlib
import logging
import os
import signal
from collections import Counter
from collections.abc import AsyncIterator, Callable, Container
from datetime import UTC, datetime

import anyio
import anyio.lowlevel

from asynctorchx.schedulers.api import DescribeAppResponse, ListAppResponse, Stream
from asynctorchx.schedulers.local._errors import LogsRemovedError
from asynctorchx.schedulers.local._log_files import TimeIndex
from asynctorchx.schedulers.local._process_identity import signal_group_if_same, this_process
from asynctorchx.schedulers.local._records import (
    AppRecord,
    ListEntry,
    cancel_request_path,
    is_finished,
    read_index,
    read_record,
    record_ids,
    record_path,
    records_directory,
    replace_private_file,
    supervisor_gone,
    supervisor_key,
    write_index,
)
from asynctorchx.schedulers.local._supervisor import LocalApp, read_error_file
from asynctorchx.schedulers.local._watch import Changes, ChangeWatch
from asynctorchx.schedulers.toolkit import (
    LogBlock,
    LogPosition,
    LogQuery,
    describe_app,
    role_statuses,
    tail_blocks,
)
from asynctorchx.specs.api import NONE, AppState, EndCause, ReplicaStatus, is_terminal

logger = logging.getLogger(__name__)


def settled_state(record: AppRecord) -> tuple[AppState, str | None]:
    """The app's state as a reader must report it, and the message that goes with it."""
    if is_terminal(record.state) or not supervisor_gone(record):
        return record.state, None
    pid = record.supervisor.pid if record.supervisor is not None else "?"
    return AppState.FAILED, (
        f"the process that supervised the app (pid {pid}) died while it was"
        f" {record.state.name} (killed by SIGKILL, or crashed) without recording its end;"
        " its replicas were ended with it"
    )


def describe_record(record: AppRecord) -> DescribeAppResponse:
    """The ``DescribeAppResponse`` of an app from its record (the toolkit's ``describe_app``); only
    the replicas of a supervisor that died have their error file read here."""
    state, msg = settled_state(record)
    dead = msg is not None  # its supervisor died: what still ran was ended with it
    replicas = []
    for replica in record.replicas:
        replica_state, error = replica.state, replica.error
        if dead and not is_terminal(replica_state):  # ended with its supervisor, unrecorded
            error = read_error_file(os.path.join(replica.log_dir, "error.json"))
            replica_state = AppState.FAILED
        status = ReplicaStatus(
            id=replica.replica_id,
            state=replica_state,
            role=replica.role,
            hostname="localhost",
            structured_error_msg=NONE if error is None else error,
            exit_code=replica.exit_code,
            started=_utc(replica.started),
            ended=_utc(replica.ended),
        )
        replicas.append(status)
    names = [role.name for role in record.roles] or list(
        dict.fromkeys(replica.role for replica in record.replicas)
    )
    return describe_app(
        record.app_id,
        role_statuses(replicas, names),
        cancelled=record.cancelled,
        num_restarts=record.num_restarts + sum(r.restarts for r in record.replicas),
        msg=msg,
        ui_url=f"file://{record.log_dir}",
        roles=record.roles,
        state=state,
        # a failed replica exited by itself; with its supervisor dead, nothing says how it ended
        cause=EndCause.EXITED if state == AppState.FAILED and not dead else None,
        submitted=_utc(record.submitted),
        ended=_utc(record.ended),
    )


def _utc(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


class AppView(abc.ABC):
    """A local app as every query sees it; subclasses say where its record is read, how a waiter
    wakes and how it is cancelled."""

    def __init__(self, record: AppRecord) -> None:
        self.app_id = record.app_id
        self._replicas = record.replicas

    @abc.abstractmethod
    def record(self) -> AppRecord | None:
        """The app's record now; None once it is gone."""

    def is_finished(self) -> bool:
        """Whether nothing more will be written: the app ended, or its supervisor died."""
        record = self.record()
        return record is None or is_finished(record)

    def log_dir(self, role: str, k: int) -> str:
        """The log directory of replica ``k`` of ``role``."""
        return next(r.log_dir for r in self._replicas if (r.role, r.replica_id) == (role, k))

    @abc.abstractmethod
    def watch(self, role: str | None = None, k: int = 0) -> Changes | ChangeWatch:
        """What wakes a follower: a change of the app, or with ``role``, of that replica's logs
        too."""

    @abc.abstractmethod
    async def cancel(self) -> None:
        """Ask for the app's end; a finished app is left alone."""

    def describe(self) -> DescribeAppResponse | None:
        """The app's description (see :func:`describe_record`); None once it is gone."""
        record = self.record()
        return None if record is None else describe_record(record)

    async def wait_until(self, done: Callable[[DescribeAppResponse], bool]) -> None:
        """Await the app's description until ``done`` holds for it, or the app is gone."""
        with self.watch() as watch:
            while (record := self.record()) is not None and not done(describe_record(record)):
                await watch.wait()

    def log_blocks(self, query: LogQuery, start: LogPosition) -> AsyncIterator[LogBlock]:
        """The log lines of the replica ``query`` names (``LocalScheduler.log_blocks``)."""
        query.check_replica(self.app_id, Counter(replica.role for replica in self._replicas))
        stream = query.stream_or(Stream.COMBINED)
        log_dir = self.log_dir(query.role_name, query.k)
        if not os.path.isdir(log_dir):  # made at submit, before the record
            raise LogsRemovedError(self.app_id, log_dir)
        path = os.path.join(log_dir, f"{stream.value}.log")
        return self._follow(path, query, start, stream == Stream.COMBINED)

    async def _follow(
        self, path: str, query: LogQuery, start: LogPosition, combined: bool
    ) -> AsyncIterator[LogBlock]:
        """Yield the blocks of ``path`` (see ``tail_blocks``; ``combined``: the replica's
        ``combined.log``, whose write ends cut lines), woken by :meth:`watch` when following."""
        index = TimeIndex(path + ".idx")
        watch = self.watch(query.role_name, query.k)
        with watch if query.should_tail else contextlib.nullcontext(watch):
            blocks = tail_blocks(
                path,
                query,
                start=start,
                wait_for_change=watch.wait,
                is_finished=self.is_finished,
                time_of=index.time_of,
                cuts=index.cuts if combined else None,
            )
            async with contextlib.aclosing(blocks):  # type: ignore[type-var]
                async for block in blocks:
                    yield block


class LiveApp(AppView):
    """An app this process supervises: its record read in memory, its waiters woken by its
    events."""

    def __init__(self, app: LocalApp) -> None:
        super().__init__(app.record)
        self.app = app

    def record(self) -> AppRecord:
        """The app's record, as its supervisor keeps it."""
        return self.app.record

    def watch(self, role: str | None = None, k: int = 0) -> Changes:
        """The app's change events, or a replica's output events (set too when the app ends)."""
        outputs = {(r.record.role, r.record.replica_id): r.output for r in self.app.replicas}
        return Changes(self.app.changed if role is None else outputs[role, k])

    async def cancel(self) -> None:
        """Ask every replica to terminate (SIGTERM, ``stop_timeout``, SIGKILL)."""
        self.app.request_cancel()


class RecordedApp(AppView):
    """An app another process of this user supervises, read from its record file at each look, its
    waiters woken by the files changing and by the supervisor's exit."""

    def __init__(self, directory: str, record: AppRecord) -> None:
        super().__init__(record)
        self._directory = directory
        self._backend = record.backend
        self._supervisor = record.supervisor.pid if record.supervisor is not None else None

    def record(self) -> AppRecord | None:
        """The app's record, read again (a look taken before a watch began could miss the change the
        watch then waits for)."""
        return read_recorded(self._directory, self.app_id, self._backend)

    def watch(self, role: str | None = None, k: int = 0) -> ChangeWatch:
        """inotify on the records directory (and the replica's log directory), and the supervisor's
        exit."""
        replica = [] if role is None else [self.log_dir(role, k)]
        return ChangeWatch([*replica, self._directory], self._supervisor)

    async def cancel(self) -> None:
        """Leave a cancel request, then SIGTERM each replica group still the recorded one."""
        record = self.record()
        if record is None or is_finished(record):
            return
        request = cancel_request_path(self._directory, self.app_id)
        replace_private_file(os.path.dirname(request), os.path.basename(request), b"")
        for replica in record.replicas:
            alive = not is_terminal(replica.state)
            if alive and replica.process is not None and replica.pgid is not None:
                signal_group_if_same(replica.process, replica.pgid, signal.SIGTERM)
        await anyio.lowlevel.checkpoint()


def read_recorded(directory: str, app_id: str, backend: str) -> AppRecord | None:
    """The record of ``app_id`` in ``directory``; None when there is none this process may use (not
    a record of ``backend``'s ``app_id``, or this process's own app: its scheduler's memory is the
    truth)."""
    record = read_record(record_path(directory, app_id))
    if record is None or record.app_id != app_id or record.backend != backend:
        return None
    if record.supervisor is not None and record.supervisor == this_process():
        return None
    return record


def read_recorded_app(backend: str, app_id: str) -> RecordedApp | None:
    """The app ``app_id`` of ``backend`` recorded by another process of this user; None when it has
    no record this process may use."""
    directory = records_directory(backend, create=False)
    record = None if directory is None else read_recorded(directory, app_id, backend)
    return None if directory is None or record is None else RecordedApp(directory, record)


def list_recorded_apps(backend: str, session: str, known: Container[str]) -> list[ListAppResponse]:
    """The apps of ``backend``'s ``session`` recorded by other processes, running or ended (as
    ``docker ps -a`` lists), leaving out those in ``known``; brings the list index up to date."""
    directory = records_directory(backend, create=False)
    if directory is None:
        return []
    index = read_index(directory)
    finished: dict[str, ListEntry] = {}  # the index to keep: the finished apps recorded now
    this = supervisor_key(this_process()) or None  # None off Linux: no record is this one's
    listed = []
    for app_id in sorted(record_ids(directory)):
        entry = index.get(app_id)
        if entry is not None:
            finished[app_id] = entry
        elif app_id not in known:
            entry = _list_entry(directory, app_id, backend)
            if entry is not None and is_terminal(entry.state):
                finished[app_id] = entry
        if entry is None:
            continue
        if entry.session == session and entry.supervisor != this and app_id not in known:
            listed.append(list_response(app_id, entry.state, entry))
    if finished.keys() != index.keys():
        write_index(directory, finished)
    return listed


def _list_entry(directory: str, app_id: str, backend: str) -> ListEntry | None:
    """What ``list`` reports of ``app_id`` from its record; None when it has no record of
    ``backend``'s ``app_id``."""
    path = record_path(directory, app_id)
    record = read_record(path)
    if record is not None and settled_state(record)[0] != record.state:
        record = read_record(path)
    if record is None or record.app_id != app_id or record.backend != backend:
        return None
    state, _ = settled_state(record)  # a dead supervisor's app: FAILED
    supervisor = supervisor_key(record.supervisor)
    return ListEntry(record.session, state, supervisor, record.name, record.submitted, record.ended)


def list_response(app_id: str, state: AppState, of: AppRecord | ListEntry) -> ListAppResponse:
    """``list``'s line of an app, from its record or its index entry."""
    submitted, ended = _utc(of.submitted), _utc(of.ended)
    return ListAppResponse(app_id, state, name=of.name, submitted=submitted, ended=ended)
