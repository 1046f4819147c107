"""Replica log files of the local schedulers: the writer the pumps use and the time index
behind ``since``/``until``.

Layout (TorchX's ``torchx.schedulers.local_scheduler``):
``<replica_log_dir>/{stdout,stderr,combined}.log``. Beside each log file a binary time
index ``<name>.log.idx`` records, for every write, the file's size after it and the
wall-clock time (``struct "<Qd"``: bytes, seconds since the epoch), so ``since``/``until``
can be honoured (TorchX ignores them). ``LocalScheduler.log_iter`` reads the files with
the toolkit's :func:`~asynctorchx.schedulers.toolkit.tail_blocks`, giving it
:meth:`TimeIndex.time_of`.

Files are written with plain ``os.write`` on the loop: local page-cache writes, which do
not block it in practice.

Safety in a shared ``log_dir`` (e.g. ``/tmp/logs``, where another local user may create
names first; the directories: :mod:`asynctorchx.schedulers.local._log_dir`): log and index
files are created 0600 with ``O_CREAT | O_EXCL | O_NOFOLLOW``, and reopened (a retry
appends) only when the name is a regular file of this user with one link. TorchX's
``torchx.schedulers.local_scheduler`` opens them by path with ``open(path, "a")``.
"""

from __future__ import annotations

import bisect
import errno
import os
import stat
import struct
import time
from collections.abc import Callable

from asynctorchx.errors import UnsafeLogPathError
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
    """One append-only log file and its time index, written by the output pumps.

    Both files are created on the first write: a replica that prints nothing costs no
    file descriptor (1000 replicas of ``true`` would otherwise open 6000 files).
    """

    __slots__ = ("_data_fd", "_index_fd", "path", "size")

    def __init__(self, path: str) -> None:
        self.path = path
        self._data_fd = -1
        self._index_fd = -1
        self.size = 0

    def _open(self) -> None:
        self._data_fd = open_log_file(self.path)
        self._index_fd = open_log_file(self.path + ".idx")
        self.size = os.fstat(self._data_fd).st_size  # a retry appends to the same file

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` and its time to the index (raises ``OSError``, e.g. disk full).

        The index entry is written first, so a reader in another process never reads
        bytes whose write end (a cut line's, in ``combined.log``) it cannot see yet.
        """
        if self._data_fd < 0:
            self._open()
        self.size += len(data)
        os.write(self._index_fd, _INDEX_ENTRY.pack(self.size, time.time()))
        view = memoryview(data)
        while view:
            written = os.write(self._data_fd, view)
            view = view[written:]

    def close(self) -> None:
        """Close both files; idempotent."""
        for fd in (self._data_fd, self._index_fd):
            if fd >= 0:
                os.close(fd)
        self._data_fd = self._index_fd = -1


class ReplicaLogWriter:
    """The three log files of one replica; pumps call :meth:`write` per chunk read.

    ``combined.log`` receives only whole lines (a line from stdout and one from
    stderr never interleave), in the order they arrived; ``stdout.log`` and
    ``stderr.log`` receive the bytes as read.

    A line of more than :data:`~asynctorchx.schedulers.toolkit.MAX_LINE_BYTES`
    bytes (4 MiB, its ``\\n`` included) goes to ``combined.log`` in the pieces the
    readers cut it into (:mod:`asynctorchx.schedulers.toolkit._lines`), each its own
    write and nothing added, so that a stream that never writes a newline (``\\r``
    progress bars) holds at most that much memory and the other stream's lines go
    between its pieces, never inside them. An unterminated last line of a stream is
    its own write too. The readers of ``combined.log`` end a line at every write that
    does not end with ``\\n`` (:meth:`TimeIndex.cuts`), so they give back exactly
    these pieces. ``stdout.log`` and ``stderr.log`` keep the bytes as written.

    Args:
        directory: the replica's log directory (private, made by ``_log_dir.create_log_dirs``).
        on_write: called after every write (wakes the log followers).
        max_line_bytes: the longest line ``combined.log`` holds whole, in bytes.
    """

    def __init__(
        self,
        directory: str,
        on_write: Callable[[], None],
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self.directory = directory
        self.files = {
            name: LogFile(os.path.join(directory, f"{name}.log")) for name in STREAM_FILES
        }
        self._lines = {
            "stdout": LineAssembler(max_line_bytes),
            "stderr": LineAssembler(max_line_bytes),
        }
        self._on_write = on_write
        self._max_line_bytes = max_line_bytes
        self.error: OSError | None = None

    def write(self, stream: str, chunk: bytes) -> None:
        """Record ``chunk`` read from ``stream`` (``stdout`` or ``stderr``).

        A write error (disk full) is kept in :attr:`error` and later output is
        dropped, so the replica is never blocked on a full pipe.

        Args:
            stream: ``stdout`` or ``stderr``.
            chunk: the bytes read from it.
        """
        if self.error is None:
            try:
                self.files[stream].write(chunk)
                self._write_combined(self._lines[stream].take(chunk))
            except OSError as error:
                self.error = error
        self._on_write()

    def _write_combined(self, lines: bytes | bytearray) -> None:
        """Write whole lines (and whole pieces of a line over the limit: each its own write)
        to combined."""
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
        """``stream`` reached end of file: flush its unterminated last line to combined
        (its own write: the readers end the line there).

        Followers are woken only when that wrote something (the app's end wakes them
        anyway).
        """
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
    """Reads a ``.idx`` file: maps a byte offset of the log to the time it was written.

    Args:
        path: the index file, ``<log file>.idx`` (it may not exist yet).
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._ends: list[int] = []
        self._times: list[float] = []
        self._read_bytes = 0

    def time_of(self, offset: int) -> float | None:
        """Return when the byte at ``offset`` was written (seconds since the epoch).

        None if it is not indexed (yet): the index is read further on demand.

        Args:
            offset: a byte offset of the log file.
        """
        position = bisect.bisect_right(self._ends, offset)
        if position == len(self._ends):
            self._load()
            position = bisect.bisect_right(self._ends, offset)
            if position == len(self._ends):
                return None
        return self._times[position]

    def cuts(self, low: int, high: int) -> list[int]:
        """The ends of the writes in ``low < end <= high`` (byte offsets of the log).

        In ``combined.log`` every write ends with ``\\n`` but a piece of a line over the
        limit and a stream's unterminated last line: a reader ends a line at such an end
        (``tail_blocks``'s ``cuts``), so pieces and lines of two streams never join.

        Args:
            low: the offset the reader's bytes start at.
            high: the offset they end at.
        """
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
    """Open the log (or index) file ``path`` for appending; return its descriptor.

    The file is created with mode 0600 (``O_CREAT | O_EXCL | O_NOFOLLOW``); an existing
    one (an earlier attempt of the replica wrote it) is reopened only when it is a
    regular file of this user with a single link, without following a symbolic link.

    Args:
        path: the file.

    Raises:
        UnsafeLogPathError: ``path`` is a symbolic link, or a file this user did not
            create (another owner, another kind of file, hard links).
        OSError: the file could not be created (disk full, no permission).
    """
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
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_nlink != 1:
        os.close(fd)
        raise foreign_file_error(path)
    return fd


def foreign_file_error(path: str) -> UnsafeLogPathError:
    """The error for a log file (or directory) that this user did not create."""
    return UnsafeLogPathError(
        path,
        "exists and is not a log file of this user (another owner, another kind of file,"
        " or hard links)",
        "remove it, or choose a log_dir of your own",
    )
