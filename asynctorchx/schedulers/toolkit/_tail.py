"""Follow a growing log file, woken when its caller reports it may have grown, never by a timer."""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import aclosing
from typing import NamedTuple

import anyio
import anyio.lowlevel
import anyio.to_thread

from asynctorchx.errors import UnsafeLogPathError
from asynctorchx.schedulers.toolkit._lines import (
    MAX_LINE_BYTES,
    LineAssembler,
    iter_lines,
    line_spans,
)
from asynctorchx.schedulers.toolkit._log_query import LogQuery
from asynctorchx.schedulers.toolkit._position import LogPosition

#: Bytes read at a time (124 KiB): a block and its text stay under glibc's 128 KiB mmap
#: threshold, so blocks reuse pages (benchmark 5's ``ours`` row).
READ_SIZE = 124 << 10


class Notifier:
    """A reusable wake-up: ``event`` is awaited, ``notify()`` wakes every waiter.

    Capture ``event`` before checking the condition, so a notification between is not missed;
    the event is made lazily, inside the loop that awaits it.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: anyio.Event | None = None

    @property
    def event(self) -> anyio.Event:
        """The event the next :meth:`notify` sets."""
        event = self._event
        if event is None:
            event = self._event = anyio.Event()
        return event

    def notify(self) -> None:
        """Wake everything awaiting the current event."""
        event = self._event
        if event is not None:
            self._event = None
            event.set()


def symlink_error(path: str) -> UnsafeLogPathError:
    """The error for a log file (or directory) that is a symbolic link."""
    return UnsafeLogPathError(
        path,
        "is a symbolic link, which log files and the directories holding them never follow",
        "remove it (someone may have planted it to redirect the logs), or choose a log_dir"
        " of your own",
    )


def open_for_reading(path: str) -> int:
    """Open ``path`` read-only without following a symbolic link; return its descriptor.

    Raises:
        UnsafeLogPathError: ``path`` is a symbolic link (one planted to redirect a reader).
        FileNotFoundError: nothing is at ``path``.
        OSError: it cannot be opened otherwise.
    """
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW)  # not inherited (PEP 446)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise symlink_error(path) from None
        raise


class LogBlock(NamedTuple):
    """Log lines (with their ``\\n``) and the position of the first, to read them again from."""

    position: LogPosition
    lines: Iterable[str]


async def lines_of(blocks: AsyncIterator[LogBlock]) -> AsyncIterator[str]:
    """Yield the lines of ``blocks``; closing this closes ``blocks``.

    One generator per line, not two (benchmark 5's ``log_iter`` row).
    """
    async with aclosing(blocks):  # type: ignore[type-var]
        async for _, lines in blocks:
            for line in lines:
                yield line


async def tail_blocks(
    path: str,
    query: LogQuery,
    *,
    start: LogPosition = 0,
    is_finished: Callable[[], bool],
    time_of: Callable[[int], float | None] | None = None,
    offload_reads: bool = False,
    wait_for_change: Callable[[], Awaitable[object]],
    max_line_bytes: int = MAX_LINE_BYTES,
    cuts: Callable[[int, int], list[int]] | None = None,
) -> AsyncIterator[LogBlock]:
    """Yield the lines ``query`` asks for of the log file at ``path``, in blocks at byte offsets.

    The file may not exist yet; with ``should_tail`` it is followed until ``is_finished()``.

    Args:
        path: the log file (read-only, never through a symbolic link).
        query: regex, since/until and should_tail.
        start: the byte offset to read from: 0, or a block's position given before.
        is_finished: returns True once nothing more will be written to the file.
        time_of: byte offset -> seconds since the epoch it was written, for since/until.
        offload_reads: read in a worker thread (a shared filesystem can block).
        wait_for_change: awaited at end of file; returns once the file may have grown.
        max_line_bytes: a longer line is yielded in pieces (bytes).
        cuts: the write ends in ``(low, high]``; a line also ends at one not after ``\\n``.

    Raises:
        UnsafeLogPathError: ``path`` is a symbolic link.
        ValueError: ``max_line_bytes`` is under 4, or ``start`` is not a byte offset.
        OSError: the file cannot be read.
    """
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        raise ValueError(
            f"{start!r} is not a position in a log file: give 0 (its start) or the position"
            " of a block read from the same file (a byte offset)"
        )
    assembler = LineAssembler(max_line_bytes, start)
    select = _selector(query, time_of, max_line_bytes)
    while True:
        finished = is_finished()
        try:
            fd = open_for_reading(path)
            break
        except FileNotFoundError:
            if finished or not query.should_tail:
                return
            await wait_for_change()
    try:
        os.lseek(fd, start, os.SEEK_SET)
        while True:
            finished = is_finished()
            if offload_reads:
                chunk = await anyio.to_thread.run_sync(os.read, fd, READ_SIZE)
            else:
                chunk = os.read(fd, READ_SIZE)
            at = assembler.offset
            if not chunk:
                if finished or not query.should_tail:
                    yield LogBlock(at, select(assembler.take_rest(), at)[0])
                    return
                await wait_for_change()
                continue
            lines, past_until = _split(assembler, chunk, cuts, select)
            yield LogBlock(at, lines)
            if past_until:
                return
            await anyio.lowlevel.checkpoint()  # a long file must not hog the loop
    finally:
        os.close(fd)


#: (data, its file offset) -> the kept lines, and whether a line past ``until`` was met
_Select = Callable[[bytes, int], tuple[Iterable[str], bool]]


def _split(
    assembler: LineAssembler,
    chunk: bytes,
    cuts: Callable[[int, int], list[int]] | None,
    select: _Select,
) -> tuple[Iterable[str], bool]:
    """The selected lines ``chunk`` completes, also ending lines at ``cuts``; as :data:`_Select`."""
    offset = assembler.offset + assembler.pending_bytes
    ends = [] if cuts is None else [cut - offset for cut in cuts(offset, offset + len(chunk))]
    ends = [end for end in ends if chunk[end - 1] != 0x0A]
    if not ends:
        at = assembler.offset
        return select(assembler.take(chunk), at)
    kept: list[str] = []
    start = 0
    for end in [*ends, len(chunk)]:
        at = assembler.offset
        data = assembler.take(chunk[start:end])
        if end in ends:
            data += assembler.take_rest()
        lines, past_until = select(data, at)
        kept += lines
        if past_until:
            return kept, True
        start = end
    return kept, False


def _selector(
    query: LogQuery, time_of: Callable[[int], float | None] | None, limit: int
) -> _Select:
    if time_of is not None and query.has_time_bounds:
        return _timed_selector(query, time_of, limit)
    pattern = query.pattern
    if pattern is None:
        return lambda data, offset: (iter_lines(data, limit), False)
    return lambda data, offset: (filter(pattern.search, iter_lines(data, limit)), False)


def _timed_selector(query: LogQuery, time_of: Callable[[int], float | None], limit: int) -> _Select:
    """Select the lines within ``since``/``until`` that match ``regex``, by their offsets."""
    since, until = query.since_timestamp, query.until_timestamp

    def select(data: bytes, offset: int) -> tuple[list[str], bool]:
        kept: list[str] = []
        for start, stop in line_spans(data, len(data), limit):
            line = data[start:stop].decode("utf-8", "replace")
            when = time_of(offset + start)
            if when is not None:
                if since is not None and when < since:
                    continue
                if until is not None and when > until:
                    return kept, True
            if query.matches(line):
                kept.append(line)
        return kept, False

    return select
