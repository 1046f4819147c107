"""Log positions: where a backend reads a replica's log again from, as typed values.

A stamped log is read again from a stamp, dropping the lines already delivered at it.
"""

from __future__ import annotations

import re
from typing import Any, Generic, NamedTuple, Protocol, TypeVar


class Stamped(NamedTuple):
    """A position in a stamped log: after ``lines`` lines stamped ``ns`` (ns since the epoch)."""

    ns: int
    lines: int


class StampedPair(NamedTuple):
    """A position in a combined read of two stamped streams (Docker's stdout and stderr)."""

    stdout: Stamped
    stderr: Stamped


class InContainer(NamedTuple):
    """A position ``at`` in the log of the pod's ``container``-th other container (a sidecar)."""

    container: int
    at: Stamped


#: Where a backend reads a log again from: bytes or lines as ``int``; ``0``: the start.
LogPosition = int | Stamped | StampedPair | InContainer

#: A stamped log's start: no line delivered.
STAMPED_START = Stamped(0, 0)

_P = TypeVar("_P", Stamped, StampedPair, InContainer)


def position_of(start: LogPosition, kind: type[_P], backend: str) -> _P | None:
    """``start`` as the position ``kind`` a backend reads (``None`` for ``0``), else ValueError."""
    if isinstance(start, kind):
        return start
    if isinstance(start, int) and not isinstance(start, bool) and start == 0:
        return None
    raise ValueError(
        f"{start!r} is not a log position of this {backend} read: give 0 (the log's start)"
        f" or the position of a block read from the same replica and stream ({kind.__name__})"
    )


class _Ordered(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


S = TypeVar("S", bound=_Ordered)


class StampSkip(Generic[S]):
    """One stamped stream's position, and what a request from it repeats.

    A request from a stamp (inclusive: Docker's ``since``, the kubelet's ``sinceTime``)
    sends again the ``count`` lines delivered at ``mark``.
    """

    __slots__ = ("count", "floor", "mark", "skip")

    def __init__(self, mark: S, count: int) -> None:
        self.mark = mark
        self.count = count
        #: The current request's start: lines stamped before it are dropped.
        self.floor = mark
        #: Lines stamped ``floor`` still to drop in the current request.
        self.skip = count

    def begin(self, floor: S) -> None:
        """Start a request for the stream from ``floor`` (at or after :attr:`mark`)."""
        self.floor = floor
        self.skip = self.count if floor == self.mark else 0

    def repeats(self, stamp: S, ends_line: bool = True) -> bool:
        """Whether a line (or part, ``ends_line`` False) was delivered before; else deliver it."""
        if stamp < self.floor:
            return True
        if self.skip and stamp == self.floor:
            self.skip -= ends_line
            return True
        if ends_line:
            self.delivered(stamp)
        return False

    def delivered(self, stamp: S) -> None:
        """Move the position past a line stamped ``stamp``."""
        if stamp == self.mark:
            self.count += 1
        else:
            self.mark, self.count = stamp, 1


#: ``o{offset}``, ``t{ns}.{count}``, two of those joined by ``,``, or ``c{container}t...``
_POSITION = re.compile(
    r"o(\d{1,20})|c(\d{1,20})t(\d{1,20})\.(\d{1,20})"
    r"|t(\d{1,20})\.(\d{1,20})(?:,t(\d{1,20})\.(\d{1,20}))?"
)


def format_position(position: LogPosition) -> str:
    """The text of ``position`` (see :func:`parse_position`)."""
    if isinstance(position, InContainer):
        return f"c{position.container}{format_position(position.at)}"
    if isinstance(position, StampedPair):
        return ",".join(map(format_position, position))
    if isinstance(position, Stamped):
        return f"t{position.ns}.{position.lines}"
    return f"o{position}"


def parse_position(text: str) -> LogPosition:
    """The position :func:`format_position` wrote as ``text``.

    Raises:
        ValueError: ``text`` is not ``o{offset}``, ``t{ns}.{count}`` (two joined by ``,``)
            or ``c{container}t{ns}.{count}``.
    """
    match = _POSITION.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not a log position: 'o' and an offset, 't' and a stamp '.' a count,"
            " two of the latter joined by ',', or 'c' and a container's place before one"
        )
    offset, container, in_ns, in_count, ns, count, err_ns, err_count = match.groups()
    if offset is not None:
        return int(offset)
    if container is not None:
        return InContainer(int(container), Stamped(int(in_ns), int(in_count)))
    stamped = Stamped(int(ns), int(count))
    if err_ns is None:
        return stamped
    return StampedPair(stamped, Stamped(int(err_ns), int(err_count)))
