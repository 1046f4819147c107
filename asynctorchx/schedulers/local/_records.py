"""The one record of a local app, and its file: what a supervisor tells the user's other processes.

In ``$ASYNCTORCHX_STATE_DIR``, else ``$XDG_STATE_HOME/asynctorchx``, else
``~/.local/state/asynctorchx`` (XDG Base Directory specification).
"""

# No ``from __future__ import annotations``: real field types spare the converter a
# ``typing.get_type_hints`` at a process's first record write.
import contextlib
import functools
import json
import logging
import os
import secrets
import shutil
import stat
import time
from collections.abc import Mapping
from typing import NamedTuple

import anyio
import anyio.lowlevel
import attrs

from asynctorchx.schedulers.local._process_identity import ProcessIdentity, this_process
from asynctorchx.schedulers.toolkit import Notifier
from asynctorchx.specs.api import AppState, Role, is_terminal
from asynctorchx.specs.converter import converter

logger = logging.getLogger(__name__)

#: The environment variable naming the state directory.
STATE_DIR_VARIABLE = "ASYNCTORCHX_STATE_DIR"
#: The version of the record layout; a record of another version is not read.
RECORD_VERSION = 1
#: Seconds from an app's change to the coalesced write of its record.
COALESCE_SECONDS = 0.05
#: Seconds after its last write that a finished record is pruned (7 days).
MAX_RECORD_AGE = 7 * 24 * 3600.0
#: Records kept per backend at most: the oldest finished ones beyond are pruned.
MAX_RECORDS = 1000
#: The file's name in an app's log directory (TorchX's).
SUCCESS_FILE = "SUCCESS"
#: The list index's name in a records directory (a dot name: never taken for a record).
INDEX_NAME = ".index"
#: The folder of a records directory that keeps the logs of apps run without ``log_dir``.
LOGS_DIR = "logs"
_DIRECTORY_MODE = 0o700
_SUFFIX = ".json"


@attrs.define
class ReplicaRecord:
    """One replica in an app record."""

    role: str
    replica_id: int
    state: AppState
    log_dir: str
    pid: int | None = None
    pgid: int | None = None
    process: ProcessIdentity | None = None
    exit_code: int | None = None
    restarts: int = 0
    error: str | None = None
    started: float | None = None  # seconds since the epoch, of the latest attempt
    ended: float | None = None


@attrs.define
class AppRecord:
    """What a supervisor records of a local app."""

    app_id: str
    backend: str
    session: str
    uid: int
    state: AppState
    log_dir: str
    supervisor: ProcessIdentity | None
    replicas: list[ReplicaRecord]
    roles: list[Role] = attrs.field(factory=list)
    cancelled: bool = False
    num_restarts: int = 0
    stop_timeout: float = 0.0
    updated: float = 0.0
    version: int = RECORD_VERSION
    name: str = ""
    submitted: float | None = None  # seconds since the epoch, as ``ended``
    ended: float | None = None


def state_directory() -> str:
    """The user's state directory for asynctorchx; never created here."""
    explicit = os.environ.get(STATE_DIR_VARIABLE)
    if explicit:
        return os.path.abspath(explicit)
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(xdg):
        return os.path.join(xdg, "asynctorchx")
    return os.path.join(os.path.expanduser("~"), ".local", "state", "asynctorchx")


def records_directory(backend: str, *, create: bool) -> str | None:
    """The directory of ``backend``'s records (``create``: made 0700 when missing); None when it is
    missing or not a private directory of this user."""
    state = state_directory()
    directory = os.path.join(state, backend)
    if create:
        os.makedirs(os.path.dirname(state), mode=_DIRECTORY_MODE, exist_ok=True)
    # each checked before anything is made in it: a link planted there is never followed
    paths = (state, directory, os.path.join(directory, "cancel")) if create else (state, directory)
    for path in paths:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, _DIRECTORY_MODE)
        if not _is_private_directory(path, narrow=create):
            return None
    return directory


def _is_private_directory(path: str, *, narrow: bool) -> bool:
    """Whether ``path`` is a directory of this user (not a link); ``narrow``: make it 0700."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        if narrow:
            logger.warning(
                "%s is not a directory of this user (uid %d): no app records are kept there",
                path,
                os.geteuid(),
            )
        return False
    if narrow and stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, _DIRECTORY_MODE)
    return True


def record_path(directory: str, app_id: str) -> str:
    return os.path.join(directory, app_id + _SUFFIX)


def cancel_request_path(directory: str, app_id: str) -> str:
    return os.path.join(directory, "cancel", app_id)


def replace_private_file(directory: str, name: str, data: bytes) -> None:
    """Make ``<directory>/<name>`` hold ``data``, atomically, mode 0600, never through a planted
    link (a temporary ``O_EXCL | O_NOFOLLOW`` file, then ``os.replace``)."""
    temporary = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_success_file(record: AppRecord) -> None:
    """Write TorchX's ``<app log dir>/SUCCESS`` (its ``json.dumps(info, indent=2)`` layout) once the
    app ended, privately and atomically; a failure is logged, never raised."""
    roles: dict[str, list[dict[str, object]]] = {}
    for replica in record.replicas:
        roles.setdefault(replica.role, []).append(
            {
                "replica_id": replica.replica_id,
                "pid": replica.pid,
                "exitcode": replica.exit_code,
                "stdout": os.path.join(replica.log_dir, "stdout.log"),
                "stderr": os.path.join(replica.log_dir, "stderr.log"),
                "error_file": os.path.join(replica.log_dir, "error.json"),
            }
        )
    info = {
        "app_id": record.app_id,
        "log_dir": record.log_dir,
        "final_state": record.state.name,
        "last_updated": time.time(),
        "roles": roles,
    }
    data = json.dumps(info, indent=2).encode()
    try:
        replace_private_file(record.log_dir, SUCCESS_FILE, data)
    except OSError as error:
        logger.warning(
            "%s: could not write %s in %s: %s", record.app_id, SUCCESS_FILE, record.log_dir, error
        )


def write_record(directory: str, record: AppRecord) -> None:
    """Write ``record`` atomically (a 0600 temporary file moved over the old record)."""
    data = json.dumps(converter.unstructure(record), separators=(",", ":")).encode()
    replace_private_file(directory, record.app_id + _SUFFIX, data)


def read_record(path: str) -> AppRecord | None:
    """The record at ``path``; None if absent, not this user's, or not a record."""
    data = _read_private_file(path)
    if data is None:
        return None
    try:
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("version") != RECORD_VERSION:
            return None
        record = converter.structure(raw, AppRecord)
    except Exception:  # a truncated or foreign file is not a record
        return None
    return record if record.uid == os.geteuid() else None


def _read_private_file(path: str) -> bytes | None:
    """The content of ``path`` if it is a regular file of this user (never through a symbolic link);
    None otherwise, or when it cannot be read."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                return None
            return file.read()
    except OSError:
        return None


def record_ids(directory: str) -> list[str]:
    """The app ids that have a record in ``directory`` (none when it cannot be read)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [name[: -len(_SUFFIX)] for name in names if name.endswith(_SUFFIX) and name[0] != "."]


def supervisor_gone(record: AppRecord) -> bool:
    """Whether the process that wrote ``record`` is known to be gone."""
    supervisor = record.supervisor
    return supervisor is not None and supervisor != this_process() and not supervisor.is_running()


def is_finished(record: AppRecord) -> bool:
    """Whether nothing will change ``record`` any more: terminal, or its supervisor gone."""
    return is_terminal(record.state) or supervisor_gone(record)


def prune_records(directory: str, now: float | None = None) -> None:
    """Remove the finished records of ``directory`` beyond the age and count limits."""
    now = time.time() if now is None else now
    written: list[tuple[float, str]] = []
    for app_id in record_ids(directory):
        with contextlib.suppress(OSError):
            written.append((os.lstat(record_path(directory, app_id)).st_mtime, app_id))
    written.sort()
    # oldest first: only the records that may go are read
    excess = len(written) - MAX_RECORDS
    for mtime, app_id in written:
        too_old = now - mtime > MAX_RECORD_AGE
        if excess <= 0 and not too_old:
            break
        record = read_record(record_path(directory, app_id))
        if record is not None and is_finished(record):
            with contextlib.suppress(OSError):
                os.unlink(record_path(directory, app_id))
                excess -= 1
            if record.log_dir.startswith(os.path.join(directory, LOGS_DIR) + os.sep):
                shutil.rmtree(record.log_dir, ignore_errors=True)  # the logs kept with it
    # the temporary files and cancel requests over an hour old
    for folder in (directory, os.path.join(directory, "cancel")):
        with contextlib.suppress(OSError):
            for entry in list(os.scandir(folder)):
                stale = entry.name.endswith(".tmp") or folder != directory
                with contextlib.suppress(OSError):
                    old = stale and now - entry.stat(follow_symlinks=False).st_mtime > 3600
                    if old and entry.is_file(follow_symlinks=False):
                        os.unlink(entry.path)


class ListEntry(NamedTuple):
    """What ``list`` reports of a finished app, as the list index keeps it."""

    session: str
    state: AppState
    supervisor: str
    name: str = ""
    submitted: float | None = None
    ended: float | None = None


def supervisor_key(identity: ProcessIdentity | None) -> str:
    """``identity`` as one string, ``pid/start_time/boot_id``; ``""`` for None."""
    return "" if identity is None else f"{identity.pid}/{identity.start_time}/{identity.boot_id}"


#: A terminal state by its name: the one lookup that both decodes and checks an entry's state.
_TERMINAL_STATES = {state.name: state for state in AppState if is_terminal(state)}


def read_index(directory: str) -> dict[str, ListEntry]:
    """The list index of ``directory`` (app id -> entry); empty when missing or not a valid index,
    which the caller then rebuilds."""
    data = _read_private_file(os.path.join(directory, INDEX_NAME))
    if data is None:
        return {}
    entries: dict[str, ListEntry] = {}
    try:
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("version") != RECORD_VERSION:
            return {}
        for session, state_name, supervisor, apps in raw["apps"]:
            if not (isinstance(session, str) and isinstance(supervisor, str)):
                return {}
            state = _TERMINAL_STATES[state_name]
            for app_id, name, submitted, ended in apps:
                times = (None if t is None else float(t) for t in (submitted, ended))
                entries[str(app_id)] = ListEntry(session, state, supervisor, str(name), *times)
    except Exception:  # a truncated or foreign file, a state not terminal: not an index
        return {}
    return entries


def write_index(directory: str, entries: Mapping[str, ListEntry]) -> None:
    """Make ``entries`` the list index of ``directory``, atomically, grouped by session, state
    and supervisor (the apps of one run share them); a failure is logged, never raised."""
    groups: dict[tuple[str, str, str], list[object]] = {}
    for app_id, e in entries.items():
        row = [app_id, e.name, e.submitted, e.ended]
        groups.setdefault((e.session, e.state.name, e.supervisor), []).append(row)
    rows = [[*group, apps] for group, apps in groups.items()]
    # "apps", not an earlier layout's "groups": each release rebuilds the other's index
    data = json.dumps({"version": RECORD_VERSION, "apps": rows}, separators=(",", ":"))
    try:
        replace_private_file(directory, INDEX_NAME, data.encode())
    except OSError as error:
        logger.debug("could not write the list index of %s: %s", directory, error)


class RecordKeeper:
    """Writes one scheduler's records: at once at an app's start and end, coalesced in between."""

    def __init__(self, backend: str, session: str) -> None:
        self.backend = backend
        self.session = session
        self._dirty: dict[str, AppRecord] = {}
        self._wake = Notifier()

    @functools.cached_property
    def directory(self) -> str | None:
        """The records directory (created, and pruned, on first use); None if unusable."""
        try:
            directory = records_directory(self.backend, create=True)
        except OSError as error:
            logger.warning("no app records for %s: %s", self.backend, error)
            return None
        if directory is not None:
            prune_records(directory)
        return directory

    def changed(self, record: AppRecord) -> None:
        """Write ``record`` one to two :data:`COALESCE_SECONDS` from its first change since its last
        write, unless :meth:`write_now` comes first."""
        if not self._dirty:
            self._wake.notify()
        self._dirty[record.app_id] = record

    def write_now(self, record: AppRecord) -> None:
        """Write ``record`` now (its app's start, its end), with every change so far."""
        self._dirty.pop(record.app_id, None)
        directory = self.directory
        if directory is None:
            return
        record.updated = time.time()
        try:
            write_record(directory, record)
        except OSError as error:
            logger.warning("%s: could not write its record: %s", record.app_id, error)

    def ended(self, record: AppRecord) -> None:
        """The app ended: write its ``SUCCESS`` file and final record, remove its cancel request;
        called before any waiter of the app wakes."""
        write_success_file(record)
        self.write_now(record)
        if self.directory is not None:
            with contextlib.suppress(OSError):
                os.unlink(cancel_request_path(self.directory, record.app_id))

    def flush(self) -> None:
        for record in list(self._dirty.values()):
            self.write_now(record)

    async def run(self) -> None:
        """Write each changed record when due (see :meth:`changed`), forever."""
        while True:
            event = self._wake.event
            if not self._dirty:
                await event.wait()
            due = list(self._dirty)  # changed COALESCE_SECONDS ago once this sleep ends
            await anyio.sleep(COALESCE_SECONDS)
            for app_id in due:
                record = self._dirty.get(app_id)  # None: written at once in the meantime
                if record is not None:
                    self.write_now(record)
