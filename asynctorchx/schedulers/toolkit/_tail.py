"""Follow a growing log file, woken when it may have grown (never by a polling timer).

TorchX's ``torchx.schedulers.streams``/``LogIterator`` tail a file by sleeping between
reads. Here the reader awaits a change its caller reports (the local schedulers' writes,
through a :class:`Notifier` or an inotify watch; a Slurm job's next state poll): a new
line reaches the caller as soon as it is written, and an idle follower costs nothing.
"""

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

#: Bytes read at a time (124 KiB). Large enough that the per-block cost (a read, a decode,
#: a checkpoint) is small beside the lines'; small enough that a block of ASCII lines and
#: its text stay under glibc's ``malloc`` mmap threshold (128 KiB by default): above it
#: every block is fresh pages (``mmap``, page faults, ``munmap``). Guarded by benchmark 5's
#: ``ours`` row (``log_iter`` of a finished replica, ``benchmarks/README.md``).
READ_SIZE = 124 << 10
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class Notifier:
    """A reusable wake-up: ``event`` is awaited, ``notify()`` wakes every waiter.

    anyio events fire once, so each ``notify`` sets the current event and the next
    waiter gets a fresh one. A waiter captures ``event`` *before* checking its
    condition, so a notification between the check and the await is never missed.
    The event is made when a waiter first asks for it, inside the event loop that awaits
    it (an ``anyio.Event`` needs one), so a notifier can be made anywhere and a
    ``notify`` with nobody waiting does nothing.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: anyio.Event | None = None

    @property
    def event(self) -> anyio.Event:
        """The event the next :meth:`notify` sets (made now if nobody asked before)."""
        event = self._event
        if event is None:
            event = self._event = anyio.Event()
        return event

    def notify(self) -> None:
        """Wake everything awaiting the current event (nothing to do if nobody asked)."""
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

    Args:
        path: the file.

    Raises:
        UnsafeLogPathError: ``path`` is a symbolic link (``O_NOFOLLOW``: a link planted
            in a shared log directory must not make a reader return another file).
        FileNotFoundError: nothing is at ``path``.
        OSError: it cannot be opened otherwise (no permission).
    """
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | _NOFOLLOW)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise symlink_error(path) from None
        raise


class LogBlock(NamedTuple):
    """A block of log lines and where its backend reads them again from
    (:meth:`Scheduler.log_blocks <asynctorchx.schedulers.api.Scheduler.log_blocks>`).

    Args:
        position: the position of its first line (for a file, its byte offset).
        lines: the lines, each with its ``\\n`` (but a log's unterminated last line).
    """

    position: LogPosition
    lines: Iterable[str]


async def lines_of(blocks: AsyncIterator[LogBlock]) -> AsyncIterator[str]:
    """Yield the lines of ``blocks``, one by one; closing this closes ``blocks``.

    Every line is yielded by this one generator: relaying each line through a second one
    cost about a sixth of the throughput on large logs (benchmark 5, ``log_iter``).

    Args:
        blocks: an async iterator of :data:`LogBlock`.
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
    """Yield the lines of the log file at ``path`` that ``query`` asks for, a block at a time.

    Each block is the byte offset of its first line (or piece) in the file and the lines
    (with their ``\\n``) that one read completed; reading again from that offset gives
    the same lines from there on. Lines follow
    :mod:`asynctorchx.schedulers.toolkit._lines`'s rule. Without ``should_tail`` the
    lines there now (an unterminated last one too) are yielded, then the iterator ends;
    with it, it follows until ``is_finished()`` and every line was yielded. The file
    may not exist yet: it is awaited like new output.

    Args:
        path: the log file (opened read-only, never created, never through a symbolic
            link).
        query: regex, since/until and should_tail (its role and replica are the caller's).
        start: the byte offset to read from: 0, or a block's position given before.
        is_finished: returns True once nothing more will be written to the file.
        time_of: maps a byte offset of the file to when it was written (seconds since
            the epoch), or None when unknown; needed to honour ``since``/``until``
            (without it they are ignored, as TorchX ignores them).
        offload_reads: read in a worker thread (``anyio.to_thread``), for files on a
            shared filesystem where a read can block; local files are read on the loop.
        wait_for_change: awaited at end of file, returns once the file may have grown
            since the last look (the last return, or the start), e.g. a ``ChangeWatch``'s
            ``wait`` on the local schedulers, the job's next state poll on Slurm
            (``BatchedPoller.next_poll``); ``is_finished`` is asked again after it.
        max_line_bytes: a line longer than this many bytes is yielded in pieces (see
            :mod:`asynctorchx.schedulers.toolkit._lines`), so memory stays bounded
            whatever the file holds (default :data:`MAX_LINE_BYTES`, 4 MiB).
        cuts: for a file whose writer ends a line without ``\\n`` by ending a write
            there (the local ``combined.log``: a piece of a long line, a stream's
            unterminated last line): returns the ends of the writes in ``(low, high]``;
            a line also ends at each that does not follow a ``\\n``.

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
    while True:  # the file appears with the first output
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
                chunk = os.read(fd, READ_SIZE)  # a local file's page cache: on the loop
            if not chunk:  # end of file for now
                if finished or not query.should_tail:
                    at = assembler.offset
                    yield LogBlock(at, select(assembler.take_rest(), at)[0])
                    return
                await wait_for_change()
                continue
            at = assembler.offset
            lines, past_until = _split(assembler, chunk, cuts, select)
            yield LogBlock(at, lines)
            if past_until:
                return
            await anyio.lowlevel.checkpoint()  # a long file must not hog the loop
    finally:
        os.close(fd)


#: Picks the lines of ``data`` (whole lines, whole pieces of a long one, or a line's
#: unterminated end) whose first byte is at ``offset`` in the file: the kept lines, and
#: whether a line past ``until`` was met.
_Select = Callable[[bytes, int], tuple[Iterable[str], bool]]


def _split(
    assembler: LineAssembler,
    chunk: bytes,
    cuts: Callable[[int, int], list[int]] | None,
    select: _Select,
) -> tuple[Iterable[str], bool]:
    """The selected lines ``chunk`` completes, and whether a line past ``until`` was met; a
    line also ends at each of ``cuts`` in ``chunk`` that does not follow a ``\\n``."""
    offset = assembler.offset + assembler.pending_bytes  # the file's offset of chunk[0]
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
    """How to pick the lines of a block: all, by regex, or by time and regex."""
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
        """The kept lines of ``data``, and whether a line past ``until`` was met."""
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
