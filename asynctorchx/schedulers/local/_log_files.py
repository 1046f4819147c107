"""Replica log files of the local schedulers: the writer the pumps use and the reader
behind ``LocalScheduler.log_iter``.

Layout (TorchX's): ``<replica_log_dir>/{stdout,stderr,combined}.log``. Beside each log
file a binary time index ``<name>.log.idx`` records, for every write, the file's size
after it and the wall-clock time (``struct "<Qd"``: bytes, seconds since the epoch), so
``since``/``until`` can be honoured (TorchX ignores them).

Files are read and written with plain ``os.read``/``os.write`` on local files: page
cache I/O that does not block the event loop in practice, and a thread hop per chunk
(what ``aiofiles`` does) would cost more latency than the write itself.
"""

from __future__ import annotations

import bisect
import os
import re
import struct
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from datetime import datetime

import anyio
import anyio.lowlevel

_INDEX_ENTRY = struct.Struct("<Qd")
_READ_SIZE = 1 << 20

STREAM_FILES = ("stdout", "stderr", "combined")


class Notifier:
    """A reusable wake-up: ``event`` is awaited, ``notify()`` wakes every waiter.

    anyio events fire once, so each ``notify`` sets the current event and puts a
    fresh one in its place. A waiter captures ``event`` *before* checking its
    condition, so a notification between the check and the await is never missed.
    """

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = anyio.Event()

    def notify(self) -> None:
        """Wake everything awaiting the current event."""
        event, self.event = self.event, anyio.Event()
        event.set()


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


class _TimeIndex:
    """Reads a ``.idx`` file: maps a byte offset of the log to the time it was written."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._ends: list[int] = []
        self._times: list[float] = []
        self._read_bytes = 0

    def time_of(self, offset: int) -> float | None:
        """Time the byte at ``offset`` was written, or None if not indexed (yet)."""
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


def _split_lines(data: bytes, end: int) -> list[str]:
    """Decode ``data[:end]`` (whole lines) once and split it on ``\\n`` only.

    Decoding the block at once gives the same text as decoding each line: ``\\n`` is
    never part of a multi-byte UTF-8 sequence, so an invalid sequence cannot span two
    lines. ``str.splitlines`` would also split on ``\\r``, ``\\x0b``, ``\\x1c``...
    """
    pieces = str(memoryview(data)[:end], "utf-8", "replace").split("\n")
    pieces.pop()  # the empty text after the last "\n"
    return [piece + "\n" for piece in pieces]


def _split_lines_at(data: bytes, end: int, offset: int) -> list[tuple[int, str]]:
    """Like :func:`_split_lines`, with each line's byte offset in the file (``offset``:
    the file offset of ``data[0]``)."""
    lines: list[tuple[int, str]] = []
    start = 0
    while start < end:
        stop = data.index(b"\n", start) + 1
        lines.append((offset + start, data[start:stop].decode("utf-8", "replace")))
        start = stop
    return lines


class _LineSelector:
    """Which whole lines of a log file ``log_iter`` yields: ``regex``, ``since``, ``until``.

    Args:
        path: the log file (its time index is ``path + ".idx"``).
        regex: keep only lines in which it matches (``re.search``).
        since: skip lines written before it (naive datetimes are local time).
        until: stop at the first line written after it.
    """

    def __init__(
        self, path: str, regex: str | None, since: datetime | None, until: datetime | None
    ) -> None:
        self._pattern = re.compile(regex) if regex is not None else None
        self._since = since.timestamp() if since is not None else None
        self._until = until.timestamp() if until is not None else None
        timed = self._since is not None or self._until is not None
        self._index = _TimeIndex(path + ".idx") if timed else None
        #: True once a line written after ``until`` was met: nothing more is yielded.
        self.past_until = False

    def matches(self, line: str) -> bool:
        """True if ``line`` is kept by ``regex`` (every line is without one)."""
        return self._pattern is None or self._pattern.search(line) is not None

    def lines(self, data: bytes, end: int, offset: int) -> Iterable[str]:
        """The kept lines of ``data[:end]`` (whole lines).

        Args:
            data: bytes read from the file.
            end: where the last whole line of ``data`` ends.
            offset: the file offset of ``data[0]``.
        """
        if self._index is not None:
            return self._timed_lines(self._index, data, end, offset)
        if self._pattern is not None:
            return [line for line in _split_lines(data, end) if self._pattern.search(line)]
        return _split_lines(data, end)

    def _timed_lines(self, index: _TimeIndex, data: bytes, end: int, offset: int) -> Iterator[str]:
        for line_offset, line in _split_lines_at(data, end, offset):
            when = index.time_of(line_offset)
            if when is not None:
                if self._since is not None and when < self._since:
                    continue
                if self._until is not None and when > self._until:
                    self.past_until = True
                    return
            if self.matches(line):
                yield line


async def _open_when_written(
    path: str, wake: Callable[[], anyio.Event], is_finished: Callable[[], bool], should_tail: bool
) -> int:
    """Open the log file for reading once it exists (it appears with the first output).

    Returns its file descriptor, or -1 when it does not exist and never will (the
    replica finished) or the caller does not follow (``should_tail`` False).
    """
    while True:
        event = wake()
        finished = is_finished()
        try:
            return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            if finished or not should_tail:
                return -1
            await event.wait()


async def read_log_lines(
    path: str,
    *,
    wake: Callable[[], anyio.Event],
    is_finished: Callable[[], bool],
    should_tail: bool,
    regex: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> AsyncIterator[str]:
    """Yield the lines of the log file at ``path``, each with its ``\\n``.

    Args:
        path: the log file.
        wake: returns the event set at the next write (see :class:`Notifier`).
        is_finished: True once nothing more will be written to the file.
        should_tail: False: the lines there now (an unterminated last line too), then
            stop; True: follow until ``is_finished()`` and every line was yielded.
        regex: keep only lines in which it matches (``re.search``).
        since: skip lines written before it (naive datetimes are local time).
        until: stop at the first line written after it.

    Bytes that are not UTF-8 become U+FFFD; ``\\r`` is kept; lines are never cut.
    """
    selector = _LineSelector(path, regex, since, until)
    fd = await _open_when_written(path, wake, is_finished, should_tail)
    if fd < 0:
        return
    try:
        pending: list[bytes] = []  # an unterminated last line, waiting for its end
        offset = 0  # offset in the file of pending[0][0]
        while True:
            event = wake()
            finished = is_finished()
            chunk = os.read(fd, _READ_SIZE)
            if chunk:
                if b"\n" not in chunk:  # a long line goes on: keep it, join it once
                    pending.append(chunk)
                    await anyio.lowlevel.checkpoint()
                    continue
                data = b"".join([*pending, chunk]) if pending else chunk
                end = data.rfind(b"\n") + 1  # whole lines end here
                for line in selector.lines(data, end, offset):
                    yield line
                if selector.past_until:
                    return
                offset += end
                pending = [data[end:]] if end < len(data) else []
                await anyio.lowlevel.checkpoint()  # a long file must not hog the loop
                continue
            # end of file for now
            if finished or not should_tail:
                last = b"".join(pending).decode("utf-8", "replace")
                if last and selector.matches(last):
                    yield last
                return
            await event.wait()
    finally:
        os.close(fd)
