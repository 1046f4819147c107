"""A group's journal: its JSON Lines format, read back, appended durably, held by one driver.

One JSON object per line, its kind in ``"kind"``: ``trial`` (key, app, scheduler, cfg, mark),
``attempt`` (key, attempt number from 1, handle, the budget it spent: ``first``,
``retry``, ``preemption`` or ``lost``) and ``status`` (key, handle, terminal state, msg,
exit code, ``stopped``: the group was stopping its apps when it ended, ``ended``: epoch
seconds, and ``cause``: the ``EndCause`` name, or null).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import attrs

from asynctorchx.errors import (
    JournalCorruptError,
    JournalLockedError,
    JournalUnsafeError,
    TrialKeyError,
)
from asynctorchx.specs.api import AppDef, AppState, AppStatus, CfgVal, EndCause


@attrs.frozen
class TrialRecord:
    """A trial as its key names it: the app, scheduler and cfg in their JSON forms, and the
    mark its apps carry on the backend (``Scheduler._mark``)."""

    key: str
    app: dict[str, Any]
    scheduler: str
    cfg: dict[str, Any]
    kind: str = "trial"
    mark: str = attrs.field(factory=lambda: secrets.token_hex(8))

    @classmethod
    def of(
        cls, key: str, app: AppDef | None, scheduler: str, cfg: Mapping[str, CfgVal] | None
    ) -> TrialRecord:
        """The record of a trial, in the JSON forms the journal reads back."""
        from asynctorchx.specs.converter import converter

        return cls(
            key, _json_form(converter.unstructure(app)), scheduler, _json_form(dict(cfg or {}))
        )

    def changes(self, new: TrialRecord) -> list[str]:
        """What ``new`` changes of this trial: ``app.<field>``, ``scheduler``, ``cfg``."""
        changed = [
            f"app.{name}"
            for name in sorted(set(self.app) | set(new.app))
            if self.app.get(name) != new.app.get(name)
        ]
        return changed + [
            name for name in ("scheduler", "cfg") if getattr(self, name) != getattr(new, name)
        ]


def _json_form(value: object) -> Any:
    """``value`` as JSON reads it back (tuples become lists)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


@attrs.frozen
class AttemptRecord:
    """An app submitted for a trial, and the budget it spent."""

    key: str
    attempt: int
    handle: str
    budget: str  # "first", "retry", "preemption" (spends one of those budgets) or "lost"
    kind: str = "attempt"


@attrs.frozen
class StatusRecord:
    """The terminal status of one attempt."""

    key: str
    handle: str
    state: str
    msg: str
    exit_code: int | None
    stopped: bool
    ended: float  # when it was recorded, seconds since the epoch
    kind: str = "status"
    cause: str | None = None  # the EndCause's name

    @classmethod
    def of(cls, key: str, handle: str, status: AppStatus, stopped: bool) -> StatusRecord:
        """The record of ``status``, its exit code as :func:`exit_code`."""
        cause = None if status.cause is None else status.cause.name
        code = exit_code(status)
        return cls(
            key, handle, status.state.name, status.msg, code, stopped, time.time(), cause=cause
        )

    def status(self) -> AppStatus:
        """The recorded status as an :class:`AppStatus` (state, msg and cause)."""
        cause = None if self.cause is None else EndCause[self.cause]
        return AppStatus(AppState[self.state], msg=self.msg, cause=cause)


def exit_code(status: AppStatus) -> int | None:
    """The app's exit code: the first nonzero replica's, else 0; ``None``: none known."""
    codes = [r.exit_code for role in status.roles for r in role.replicas if r.exit_code is not None]
    return next((code for code in codes if code != 0), 0 if codes else None)


Record = TrialRecord | AttemptRecord | StatusRecord
_KINDS: dict[str, type[Record]] = {
    "trial": TrialRecord,
    "attempt": AttemptRecord,
    "status": StatusRecord,
}


@attrs.define
class TrialHistory:
    """What the journal holds of one trial."""

    trial: TrialRecord
    attempts: list[AttemptRecord] = attrs.field(factory=list)
    statuses: dict[str, StatusRecord] = attrs.field(factory=dict)  # by handle

    @property
    def last_status(self) -> StatusRecord | None:
        """The last attempt's terminal status, if recorded."""
        return self.statuses.get(self.attempts[-1].handle) if self.attempts else None


def encode(record: Record) -> bytes:
    """One line of the journal."""
    return json.dumps(attrs.asdict(record), separators=(",", ":")).encode() + b"\n"


def parse(path: str, data: bytes) -> tuple[dict[str, TrialHistory], int]:
    """The trials of journal text ``data`` and the length of its full lines (a torn last line,
    one without its newline, is left out).

    Raises:
        JournalCorruptError: a full line is no record.
    """
    whole = data.rfind(b"\n") + 1
    trials: dict[str, TrialHistory] = {}
    for number, line in enumerate(data[:whole].splitlines(), 1):
        try:
            fields = json.loads(line)
            record = _KINDS[fields.pop("kind")](**fields)
            if isinstance(record, TrialRecord):
                trials.setdefault(record.key, TrialHistory(record))
            elif isinstance(record, AttemptRecord):
                trials[record.key].attempts.append(record)
            else:
                trials[record.key].statuses[record.handle] = record
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise JournalCorruptError(path, number) from exc
    return trials, whole


def read(path: str | os.PathLike[str]) -> dict[str, TrialHistory]:
    """The trials of the journal at ``path``, read without taking it (for the CLI).

    Raises:
        OSError: the file cannot be read.
        JournalCorruptError: a full line is no record.
    """
    return parse(os.fspath(path), Path(path).read_bytes())[0]


class Journal:
    """An open journal, held exclusively (``flock``) until :meth:`close`; the holder's pid is
    in ``PATH.pid``."""

    def __init__(self, path: str, fd: int, trials: dict[str, TrialHistory]) -> None:
        self.path = path
        self.trials = trials
        self._fd = fd
        self._lock = anyio.Lock()
        self._pending = bytearray()  # lines appended since the last write began
        self._batch = anyio.Event()  # set once the pending lines are on the disk
        self._failed: OSError | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Journal:
        """Open (create, 0600) and lock the journal, read it, cut a torn last line. Blocking.

        Raises:
            JournalUnsafeError: another user owns it, or its group or others may write it.
            JournalLockedError: another process holds it.
            JournalCorruptError: a full line is no record.
        """
        name = os.fspath(path)
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            info = os.fstat(fd)
            if info.st_uid != os.getuid() or info.st_mode & 0o022:
                raise JournalUnsafeError(name)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise JournalLockedError(name, _holder(name)) from None
            trials, whole = parse(name, os.pread(fd, info.st_size, 0))
            if whole < info.st_size:
                os.ftruncate(fd, whole)
            _write_pid(name)  # once read: a new pid tells a dead driver's reaper of its successor
            return cls(name, fd, trials)
        except BaseException:
            os.close(fd)
            raise

    def history(self, record: TrialRecord) -> TrialHistory | None:
        """The history of ``record.key``; None if the journal has none.

        Raises:
            TrialKeyError: the journal records the key with another app, scheduler or cfg.
        """
        history = self.trials.get(record.key)
        if history is not None and (changed := history.trial.changes(record)):
            raise TrialKeyError(record.key, self.path, changed)
        return history

    async def append(self, record: Record) -> None:
        """Write ``record``, then flush it to the disk (``fsync``), before returning.

        Records appended while a flush is under way go to the disk together in the next one
        (a group commit): one ``fsync`` for all the trials that end at once.

        Raises:
            OSError: this or an earlier write failed; the journal takes no more records.
        """
        self._pending += encode(record)
        batch = self._batch
        async with self._lock:
            if self._failed is None and not batch.is_set():
                lines, self._pending, self._batch = bytes(self._pending), bytearray(), anyio.Event()
                try:  # shielded: the waiters of this batch learn how it ended
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(_write_synced, self._fd, lines)
                except OSError as exc:  # a line may be cut: what follows would not parse
                    self._failed = exc
                batch.set()
            if self._failed is not None:
                raise self._failed

    def close(self) -> None:
        """Remove the pid file and release the journal."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{self.path}.pid")
        os.close(self._fd)


def _write_synced(fd: int, line: bytes) -> None:
    view = memoryview(line)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def _write_pid(path: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(f"{path}.pid", flags, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(f"{os.getpid()}\n")


def _holder(path: str) -> int | None:
    try:
        return int(Path(f"{path}.pid").read_text())
    except (OSError, ValueError):
        return None
