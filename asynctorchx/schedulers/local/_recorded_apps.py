"""The apps other processes of this user supervise, seen through their records.

What a ``LocalScheduler`` answers for an app it does not hold in memory: ``describe``,
``list``, ``wait``, ``log_iter`` (following live output) and ``cancel``, from the
app's record (:mod:`._records`). TorchX's ``torchx.schedulers.local_scheduler`` knows
only the apps of its own process: ``status`` from a second terminal exits 1 there.

Rules:

* Only this user's records are read (private directories, the file's owner and the
  uid inside checked); another user's app is "not found", never shown.
* The apps this very process supervises are not read from records: its schedulers hold
  them in memory, where ``cache_size`` decides how many finished ones stay known.
* A record that says the app runs while its supervisor is gone (killed by ``SIGKILL``,
  crashed) is reported ``FAILED``, with a message saying the supervisor died.
* ``cancel`` leaves a cancel request for the supervisor (which then ends the replicas
  the graceful way and records ``CANCELLED``), and sends ``SIGTERM`` to each replica's
  process group only after checking it is still the recorded process (pid, start time
  and boot: :func:`~._process_identity.signal_group_if_same`), never to a recycled pid.
* ``list`` shows the apps of the scheduler's session whose supervisor still runs; a
  finished app of a process that ended is found by its handle only.
* Followers (``log_iter`` with ``should_tail``, ``wait``) are woken by the files
  changing and by the supervisor's exit (:mod:`._change_watch`: inotify and a pid file
  descriptor, else a poll every :data:`~._change_watch.POLL_INTERVAL` seconds).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable

import anyio
import anyio.lowlevel

from asynctorchx.schedulers.api import DescribeAppResponse, ListAppResponse, Stream
from asynctorchx.schedulers.local._change_watch import ChangeWatch
from asynctorchx.schedulers.local._error_files import read_error_file
from asynctorchx.schedulers.local._log_files import TimeIndex
from asynctorchx.schedulers.local._process_identity import signal_group_if_same, this_process
from asynctorchx.schedulers.local._records import (
    AppRecord,
    cancel_request_path,
    read_record,
    record_ids,
    record_path,
    records_directory,
    supervisor_gone,
)
from asynctorchx.schedulers.toolkit import (
    LogBlock,
    LogQuery,
    describe_app,
    role_statuses,
    tail_blocks,
)
from asynctorchx.specs.api import AppState, ReplicaStatus, is_terminal

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def settled_state(record: AppRecord) -> tuple[AppState, str | None]:
    """The app's state as a reader must report it, and the message that goes with it.

    The recorded state, except ``FAILED`` when the record says the app runs and its
    supervisor is gone.

    Args:
        record: the app's record.
    """
    if is_terminal(record.state) or not supervisor_gone(record):
        return record.state, None
    pid = record.supervisor.pid if record.supervisor is not None else "?"
    return AppState.FAILED, (
        f"the process that supervised the app (pid {pid}) died while it was"
        f" {record.state.name} (killed by SIGKILL, or crashed) without recording its end;"
        " its replicas were ended with it"
    )


def describe_record(record: AppRecord) -> DescribeAppResponse:
    """The ``DescribeAppResponse`` of a recorded app (as ``LocalScheduler.describe``).

    Args:
        record: the app's record.
    """
    state, msg = settled_state(record)
    replicas = [
        ReplicaStatus(
            id=replica.replica_id,
            state=(
                AppState.FAILED
                if msg is not None and not is_terminal(replica.state)
                else replica.state
            ),
            role=replica.role,
            hostname="localhost",
            structured_error_msg=read_error_file(os.path.join(replica.log_dir, "error.json")),
            exit_code=replica.exit_code,
        )
        for replica in record.replicas
    ]
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
    )


class _RecordView:
    """Re-reads a record when its file changed (by its inode, size and mtime)."""

    def __init__(self, path: str, record: AppRecord) -> None:
        self._path = path
        self._record: AppRecord | None = record
        self._signature: tuple[int, int, int] | None = self._stat()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self._path, follow_symlinks=False)
        except OSError:
            return None
        return info.st_ino, info.st_size, info.st_mtime_ns

    def is_finished(self) -> bool:
        """Whether nothing more will be written: the app ended, or its supervisor died."""
        signature = self._stat()
        if signature != self._signature:
            self._signature = signature
            self._record = read_record(self._path) if signature is not None else None
        record = self._record
        return record is None or is_terminal(record.state) or supervisor_gone(record)


class RecordedApps:
    """The apps of ``backend`` recorded by the other processes of this user.

    Args:
        backend: the scheduler's name.
        session: the scheduler's session (``list`` shows that session's apps).
    """

    def __init__(self, backend: str, session: str) -> None:
        self.backend = backend
        self.session = session

    def _directory(self) -> str | None:
        return records_directory(self.backend, create=False)

    def read(self, app_id: str) -> AppRecord | None:
        """The record of ``app_id``; None when there is none this process may use.

        Args:
            app_id: an app id already validated.
        """
        directory = self._directory()
        if directory is None:
            return None
        record = read_record(record_path(directory, app_id))
        if record is None or record.app_id != app_id or record.backend != self.backend:
            return None
        if record.supervisor is not None and record.supervisor == this_process():
            return None  # this process's own app: its scheduler's memory is the truth
        return record

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the recorded app, or None (see :func:`describe_record`).

        Args:
            app_id: an app id already validated.
        """
        record = self.read(app_id)
        return None if record is None else describe_record(record)

    def list(self, known: Callable[[str], bool]) -> list[ListAppResponse]:
        """The apps of this session recorded by other processes, running or ended.

        An ended app (its supervisor finished, or died) is listed with its final state
        until its record is pruned, as ``docker ps -a`` or ``squeue`` list finished
        jobs: ``asynctorchx list`` after ``asynctorchx run`` shows the run. The apps
        ``known(app_id)`` says the caller holds in memory are left out.

        Args:
            known: whether the calling scheduler already lists the app.
        """
        directory = self._directory()
        if directory is None:
            return []
        listed = []
        for app_id in sorted(record_ids(directory)):
            if known(app_id):
                continue
            record = self.read(app_id)
            if record is None or record.session != self.session:
                continue
            state, _ = settled_state(record)  # a dead supervisor's app: FAILED
            listed.append(ListAppResponse(app_id=app_id, state=state))
        return listed

    async def wait_until(
        self,
        app_id: str,
        done: Callable[[DescribeAppResponse], bool],
        timeout: float | None,
    ) -> DescribeAppResponse | None:
        """Await the recorded app's description until ``done`` holds; None if unknown.

        Woken by the record's replacement or the supervisor's exit (see the module).

        Args:
            app_id: an app id already validated.
            done: the condition on its description.
            timeout: seconds to wait at most; None: no limit.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """
        record = self.read(app_id)
        directory = self._directory()
        if record is None or directory is None:
            return None
        supervisor = record.supervisor.pid if record.supervisor is not None else None
        with anyio.fail_after(timeout), ChangeWatch([directory], supervisor) as watch:
            while True:
                response = self.describe(app_id)
                if response is None or done(response):
                    return response
                await watch.wait()

    def log_blocks(
        self, app_id: str, query: LogQuery, start: int
    ) -> AsyncIterator[LogBlock] | None:
        """The log lines of a recorded app's replica (``LocalScheduler.log_blocks``); None
        when the app is not recorded.

        Args:
            app_id: an app id already validated.
            query: the role, replica, stream and filters.
            start: the byte offset in the log file to read from.

        Raises:
            ValueError: the app has no such role or replica.
        """
        record = self.read(app_id)
        directory = self._directory()
        if record is None or directory is None:
            return None
        counts: dict[str, int] = {}
        for replica in record.replicas:
            counts[replica.role] = counts.get(replica.role, 0) + 1
        query.check_replica(app_id, counts)
        (replica,) = (
            r for r in record.replicas if r.role == query.role_name and r.replica_id == query.k
        )
        stream = query.stream_or(Stream.COMBINED)
        path = os.path.join(replica.log_dir, f"{stream.value}.log")
        view = _RecordView(record_path(directory, app_id), record)
        supervisor = record.supervisor.pid if record.supervisor is not None else None
        watched = [replica.log_dir, directory]
        combined = stream == Stream.COMBINED
        return _follow(path, query, start, combined, view, ChangeWatch(watched, supervisor))

    async def cancel(self, app_id: str) -> None:
        """Ask for the recorded app's end (see the module); a finished app is left alone.

        Args:
            app_id: an app id already validated.

        Raises:
            OSError: the cancel request could not be written (disk full).
        """
        record = self.read(app_id)
        directory = self._directory()
        if record is None or directory is None:
            return
        if is_terminal(record.state) or supervisor_gone(record):
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(cancel_request_path(directory, app_id), flags, 0o600))
        for replica in record.replicas:
            alive = not is_terminal(replica.state)
            if alive and replica.process is not None and replica.pgid is not None:
                signal_group_if_same(replica.process, replica.pgid, signal.SIGTERM)
        await anyio.lowlevel.checkpoint()


async def _follow(
    path: str, query: LogQuery, start: int, combined: bool, view: _RecordView, watch: ChangeWatch
) -> AsyncIterator[LogBlock]:
    """Yield the blocks of ``path`` (see ``tail_blocks``; ``combined``: the replica's
    ``combined.log``, whose write ends cut lines), woken by ``watch`` when following."""
    index = TimeIndex(path + ".idx")
    with watch if query.should_tail else contextlib.nullcontext(watch):
        blocks = tail_blocks(
            path,
            query,
            start=start,
            wait_for_change=watch.wait,
            is_finished=view.is_finished,
            time_of=index.time_of,
            cuts=index.cuts if combined else None,
        )
        async with contextlib.aclosing(blocks):  # type: ignore[type-var]
            async for block in blocks:
                yield block
