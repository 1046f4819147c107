"""Replica log files of the local schedulers: their directories, the writer the pumps use, and the
time index behind ``since``/``until``."""

from __future__ import annotations

import bisect
import contextlib
import errno
import os
import stat
import struct
import time
from collections.abc import Callable, Sequence

from asynctorchx.errors import UnsafeLogPathError
from asynctorchx.schedulers.local._errors import InvalidLogDirError
from asynctorchx.schedulers.toolkit import (
    MAX_LINE_BYTES,
    LineAssembler,
    has_long_line,
    line_spans,
    open_for_reading,
    symlink_error,
)

_INDEX_ENTRY = struct.Struct("<Qd")
#: Mode of the directories the local schedulers create: the owner's only.
DIRECTORY_MODE = 0o700
#: Mode of the log and index files: the owner's only.
FILE_MODE = 0o600

STREAM_FILES = ("stdout", "stderr", "combined")


class LogFile:
    """One append-only log file and its time index, written by the output pumps."""

    __slots__ = ("_data_fd", "_index_fd", "path", "size")

    def __init__(self, path: str) -> None:
        self.path = path
        self._data_fd = -1
        self._index_fd = -1
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` and its time to the index (raises ``OSError``, e.g. disk full)."""
        if self._data_fd < 0:  # opened at the first write
            self._data_fd = open_log_file(self.path)
            self._index_fd = open_log_file(self.path + ".idx")
            self.size = os.fstat(self._data_fd).st_size  # a retry appends to the same file
        self.size += len(data)
        os.write(self._index_fd, _INDEX_ENTRY.pack(self.size, time.time()))
        view = memoryview(data)
        while view:
            view = view[os.write(self._data_fd, view) :]

    def close(self) -> None:
        """Close both files; idempotent."""
        for fd in (self._data_fd, self._index_fd):
            if fd >= 0:
                os.close(fd)
        self._data_fd = self._index_fd = -1


class ReplicaLogWriter:
    """The three log files of one replica; pumps call :meth:`write` per chunk read."""

    def __init__(
        self,
        directory: str,
        on_write: Callable[[], None],
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self.files = {
            name: LogFile(os.path.join(directory, f"{name}.log")) for name in STREAM_FILES
        }
        self._lines = {name: LineAssembler(max_line_bytes) for name in ("stdout", "stderr")}
        self._on_write = on_write
        self._max_line_bytes = max_line_bytes
        self.error: OSError | None = None

    def write(self, stream: str, chunk: bytes) -> None:
        """Record ``chunk`` read from ``stream`` (``stdout`` or ``stderr``)."""
        if self.error is None:
            try:
                self.files[stream].write(chunk)
                self._write_combined(self._lines[stream].take(chunk))
            except OSError as error:
                self.error = error
        self._on_write()

    def _write_combined(self, lines: bytes | bytearray) -> None:
        """Write whole lines (and whole pieces of a line over the limit: each its own write) to
        combined."""
        limit = self._max_line_bytes
        combined = self.files["combined"]
        if not lines:
            return
        if len(lines) <= limit or not has_long_line(lines, len(lines), limit):
            combined.write(lines)
            return
        with memoryview(lines) as view:
            start = 0
            for begin, stop in line_spans(lines, len(lines), limit):
                if view[stop - 1] != 0x0A:  # a piece: the index records where it ends
                    if begin > start:
                        combined.write(view[start:begin])
                    combined.write(view[begin:stop])
                    start = stop
            if start < len(view):
                combined.write(view[start:])

    def finish(self, stream: str) -> None:
        """``stream`` reached end of file: flush its unterminated last line to combined (its own
        write: the readers end the line there)."""
        rest = self._lines[stream].take_rest()
        if not rest:
            return
        if self.error is None:
            try:
                self.files["combined"].write(rest)
            except OSError as error:
                self.error = error
        self._on_write()

    def close(self) -> None:
        """Close every file; idempotent."""
        for log_file in self.files.values():
            log_file.close()


class TimeIndex:
    """Reads a ``.idx`` file: maps a byte offset of the log to the time it was written."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._ends: list[int] = []
        self._times: list[float] = []
        self._read_bytes = 0

    def time_of(self, offset: int) -> float | None:
        """Return when the byte at ``offset`` was written (seconds since the epoch)."""
        if not self._ends or self._ends[-1] <= offset:  # written after the last load, if at all
            self._load()
        position = bisect.bisect_right(self._ends, offset)
        return self._times[position] if position < len(self._ends) else None

    def cuts(self, low: int, high: int) -> list[int]:
        """The ends of the writes in ``low < end <= high`` (byte offsets of the log)."""
        ends = self._ends
        if not ends or ends[-1] < high:
            self._load()
        return ends[bisect.bisect_right(ends, low) : bisect.bisect_right(ends, high)]

    def _load(self) -> None:
        try:
            fd = open_for_reading(self._path)
        except FileNotFoundError:
            return
        with open(fd, "rb") as index:
            index.seek(self._read_bytes)
            data = index.read()
        usable = len(data) - len(data) % _INDEX_ENTRY.size
        for end, when in _INDEX_ENTRY.iter_unpack(data[:usable]):
            self._ends.append(end)
            self._times.append(when)
        self._read_bytes += usable


def open_log_file(path: str) -> int:
    """Open the log (or index) file ``path`` for appending; return its descriptor."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise symlink_error(path) from None
        raise
    try:
        _check_log_file(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_log_file(path: str, info: os.stat_result) -> None:
    """Refuse a log file (``info``: its ``lstat`` or ``fstat``) that this user did not create."""
    if stat.S_ISLNK(info.st_mode):
        raise symlink_error(path)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_nlink != 1:
        raise UnsafeLogPathError(
            path,
            "exists and is not a log file of this user (another owner, another kind of file,"
            " or hard links)",
            "remove it, or choose a log_dir of your own",
        )


# --------------------------------------------------------------------------- directories

#: The longest file name in a replica's log directory (``combined.log.idx``, ``SUCCESS``).
_LONGEST_FILE = "combined.log.idx"
#: Used when the file system does not say (Linux's NAME_MAX and PATH_MAX).
_NAME_MAX = 255
_PATH_MAX = 4096

_FIX = "choose a log_dir that is a directory you can write to (or leave log_dir unset)"


def _missing_directories(path: str) -> list[str]:
    """``path`` and those of its parents that do not exist yet, parents first."""
    missing: list[str] = []
    while not os.path.lexists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    missing.reverse()
    return missing


def _limit(path: str, name: str, default: int) -> int:
    try:
        return os.pathconf(path, name)
    except (OSError, ValueError):
        return default


def check_log_dir(root: str, replica_dirs: Sequence[str]) -> None:
    """Check that the replicas' log directories can be made under ``root``; create nothing."""
    target = replica_dirs[0] if replica_dirs else root
    missing = _missing_directories(target)
    ancestor = os.path.dirname(missing[0]) if missing else target
    # the first existing directory on the way: the log directories are made from there
    if not os.path.isdir(ancestor):
        reason = "it is not a directory" if ancestor == root else f"{ancestor!r} is a file"
        raise InvalidLogDirError(root, reason, _FIX)
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InvalidLogDirError(
            root, f"this user (uid {os.geteuid()}) cannot create files in {ancestor!r}", _FIX
        )
    name_max = _limit(ancestor, "PC_NAME_MAX", _NAME_MAX)
    path_max = _limit(ancestor, "PC_PATH_MAX", _PATH_MAX)
    for replica_dir in replica_dirs:
        _check_lengths(root, replica_dir, name_max, path_max)


def _check_lengths(root: str, replica_dir: str, name_max: int, path_max: int) -> None:
    """Refuse a replica's log paths longer than the file system allows (a part longer than
    ``name_max`` bytes, a whole path of ``path_max`` bytes or more)."""
    longest = os.path.join(replica_dir, _LONGEST_FILE)
    too_long = [part for part in longest.split(os.sep) if len(os.fsencode(part)) > name_max]
    if too_long:
        raise InvalidLogDirError(
            root,
            f"the path part {too_long[0][:40]!r}... is {len(os.fsencode(too_long[0]))}"
            f" bytes long, more than the file system's {name_max}",
            "shorten the directory names of log_dir (session and role names are at most"
            " 100 characters)",
        )
    if len(os.fsencode(longest)) >= path_max:
        raise InvalidLogDirError(
            root,
            f"its log paths would be {len(os.fsencode(longest))} bytes long, more than"
            f" the file system's {path_max}",
            "choose a log_dir with a shorter path",
        )


def create_log_dirs(root: str, replica_dirs: Sequence[str]) -> None:
    """Make the replicas' log directories (``_prepare_log_dirs``), all or none."""
    created: list[str] = []
    try:
        _prepare_log_dirs(root, replica_dirs, created)
    except OSError as error:
        for directory in reversed(created):  # made parents first: removed children first
            with contextlib.suppress(OSError):  # left when no longer empty
                os.rmdir(directory)
        if isinstance(error, UnsafeLogPathError):
            raise
        where = error.filename if isinstance(error.filename, str) else root
        reason = error.strerror or str(error)
        parent = os.path.dirname(where)
        if error.errno == errno.ENOENT and os.path.isdir(parent):  # /proc, /sys: no mkdir
            reason = f"{parent!r} is on a file system that refuses new directories"
        raise InvalidLogDirError(where, reason, _FIX) from error


def _prepare_log_dirs(root: str, replica_dirs: Sequence[str], made: list[str]) -> None:
    """Create an app's log directories under ``root``, 0700, appending each made to ``made``."""
    for directory in _missing_directories(root) or [root]:
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, DIRECTORY_MODE)
            made.append(directory)
        info = _check_directory(directory, (os.geteuid(), 0), "give a directory as log_dir")
        if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
            raise UnsafeLogPathError(
                directory,
                "is writable by every user (mode"
                f" {stat.S_IMODE(info.st_mode):04o}), so another user can replace what is in it",
                f"run `chmod o-w {directory}` (or `chmod +t`), or choose a log_dir of your own",
            )
    seen = {root}
    for replica_dir in replica_dirs:
        path = root
        for part in os.path.relpath(replica_dir, root).split(os.sep):
            path = os.path.join(path, part)
            if path not in seen:
                seen.add(path)
                if _make_private_dir(path):
                    made.append(path)
        # not made just now: what is in it is not known to be ours
        if made[-1:] != [replica_dir]:
            for stream in STREAM_FILES:
                for name in (f"{stream}.log", f"{stream}.log.idx"):
                    log_path = os.path.join(replica_dir, name)
                    with contextlib.suppress(FileNotFoundError):
                        _check_log_file(log_path, os.lstat(log_path))


def _make_private_dir(path: str) -> bool:
    """Create ``path`` 0700 and return True, or check an existing one and return False."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, DIRECTORY_MODE)
        return True
    info = _check_directory(path, (os.geteuid(),), "remove it, or choose another log_dir")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, DIRECTORY_MODE)
    return False


def _check_directory(path: str, owners: tuple[int, ...], fix: str) -> os.stat_result:
    """``path``'s ``lstat``, once it is known to be a directory (not a link) of one of ``owners``;
    else the :class:`UnsafeLogPathError` saying why (``fix`` for a file)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise symlink_error(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeLogPathError(path, "is not a directory", fix)
    if info.st_uid not in owners:
        raise UnsafeLogPathError(
            path,
            f"is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()}), who"
            " could then read or redirect the logs",
            "remove it or choose a log_dir of your own (e.g. under your home directory)",
        )
    return info
