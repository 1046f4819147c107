"""Replica log files of the local schedulers: the writer the pumps use and the time index
behind ``since``/``until``.

Layout (TorchX's ``torchx.schedulers.local_scheduler``):
``<replica_log_dir>/{stdout,stderr,combined}.log``. Beside each log file a binary time
index ``<name>.log.idx`` records, for every write, the file's size after it and the
wall-clock time (``struct "<Qd"``: bytes, seconds since the epoch), so ``since``/``until``
can be honoured (TorchX ignores them). ``LocalScheduler.log_iter`` reads the files with
the toolkit's :func:`~asynctorchx.schedulers.toolkit.tail_file`, giving it
:meth:`TimeIndex.time_of`.

Files are written with plain ``os.write`` on local files: page cache I/O that does not
block the event loop in practice, and a thread hop per chunk (what ``aiofiles`` does)
would cost more latency than the write itself.
"""

from __future__ import annotations

import bisect
import os
import struct
import time
from collections.abc import Callable

_INDEX_ENTRY = struct.Struct("<Qd")

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
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        self._data_fd = os.open(self.path, flags, 0o644)
        self._index_fd = os.open(self.path + ".idx", flags, 0o644)
        self.size = os.fstat(self._data_fd).st_size  # a retry appends to the same file

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` and its time to the index (raises ``OSError``, e.g. disk full)."""
        if self._data_fd < 0:
            self._open()
        view = memoryview(data)
        while view:
            written = os.write(self._data_fd, view)
            view = view[written:]
        self.size += len(data)
        os.write(self._index_fd, _INDEX_ENTRY.pack(self.size, time.time()))

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
    """

    def __init__(self, directory: str, on_write: Callable[[], None]) -> None:
        self.directory = directory
        self.files = {
            name: LogFile(os.path.join(directory, f"{name}.log")) for name in STREAM_FILES
        }
        self._partial: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self._on_write = on_write
        self.error: OSError | None = None

    def write(self, stream: str, chunk: bytes) -> None:
        """Record ``chunk`` read from ``stream`` (``stdout`` or ``stderr``).

        A write error (disk full) is kept in :attr:`error` and later output is
        dropped, so the replica is never blocked on a full pipe.
        """
        if self.error is None:
            try:
                self.files[stream].write(chunk)
                partial = self._partial[stream]
                end = chunk.rfind(b"\n")
                if end < 0:
                    partial += chunk
                else:
                    if partial:
                        partial += chunk[: end + 1]
                        self.files["combined"].write(partial)
                        partial.clear()
                    else:
                        self.files["combined"].write(chunk[: end + 1])
                    partial += chunk[end + 1 :]
            except OSError as error:
                self.error = error
        self._on_write()

    def finish(self, stream: str) -> None:
        """``stream`` reached end of file: flush its unterminated last line to combined."""
        partial = self._partial[stream]
        if partial and self.error is None:
            try:
                self.files["combined"].write(partial)
            except OSError as error:
                self.error = error
        partial.clear()
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

    def _load(self) -> None:
        try:
            with open(self._path, "rb") as index:
                index.seek(self._read_bytes)
                data = index.read()
        except FileNotFoundError:
            return
        usable = len(data) - len(data) % _INDEX_ENTRY.size
        for end, when in _INDEX_ENTRY.iter_unpack(data[:usable]):
            self._ends.append(end)
            self._times.append(when)
        self._read_bytes += usable
