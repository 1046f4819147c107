"""Log positions: where a backend reads a replica's log again from, as typed values.

A position is an ``int`` (bytes into a log file; lines from the start for a scheduler
ported from TorchX), a :class:`Stamped`, a :class:`StampedPair` (Docker's combined read)
or an :class:`InContainer` (a Kubernetes pod's sidecar); ``0`` is the start everywhere.
A stamped log is read again from a stamp with the lines already delivered at that stamp
dropped (:class:`StampSkip`): several lines can share a stamp, and stamps never go back.
"""

from __future__ import annotations

import re
from typing import Any, Generic, NamedTuple, Protocol, TypeVar


class Stamped(NamedTuple):
    """A position in a stamped log: after the ``lines`` lines stamped ``ns``.

    Args:
        ns: the stamp of the last line delivered, in ns since the epoch (0: none yet).
        lines: how many of the lines delivered have that stamp (0 with ``ns`` 0).
    """

    ns: int
    lines: int


class StampedPair(NamedTuple):
    """A position in a combined read of two stamped streams (Docker's stdout and stderr).

    Args:
        stdout: stdout's position.
        stderr: stderr's position.
    """

    stdout: Stamped
    stderr: Stamped


class InContainer(NamedTuple):
    """A position in the log of a pod's other container (a sidecar), read after the
    replica's own container and the other containers before it.

    Args:
        container: the container's place among the pod's other containers (0: first).
        at: the position in its log.
    """

    container: int
    at: Stamped


#: Where a backend reads a log again from (see the module docstring); ``0``: the start.
LogPosition = int | Stamped | StampedPair | InContainer

#: A stamped log's start: no line delivered.
STAMPED_START = Stamped(0, 0)

_P = TypeVar("_P", Stamped, StampedPair, InContainer)


def position_of(start: LogPosition, kind: type[_P], backend: str) -> _P | None:
    """``start`` as the position kind a backend reads from; ``None`` for ``0`` (the start).

    Args:
        start: the position given to the backend's ``log_blocks``.
        kind: the kind of position the backend gives its blocks.
        backend: the backend's name, for the message.

    Raises:
        ValueError: ``start`` is another kind of position (another backend's, or another
            stream's): the message names it and what to give.
    """
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
    """One stamped stream's resume-and-skip: its position, and what a request repeats.

    A request from a stamp (inclusive, as Docker's ``since`` and the kubelet's
    ``sinceTime``) sends again the ``count`` lines delivered at it. Stamps are anything
    ordered as time is (ns, or Docker's fixed-width stamp text).

    Args:
        mark: the stamp of the last line delivered (below any real one before the first).
        count: how many lines delivered have that stamp.
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
        """Start a request for the stream from ``floor`` (at or after :attr:`mark`).

        Args:
            floor: the request's first stamp.
        """
        self.floor = floor
        self.skip = self.count if floor == self.mark else 0

    def repeats(self, stamp: S, ends_line: bool = True) -> bool:
        """Whether a line (or a part of one) of the request was delivered before; one that
        was not moves the position past it when it ends.

        Args:
            stamp: the line's stamp.
            ends_line: it ends the line (False: a part of a line the next part goes on).
        """
        if stamp < self.floor:
            return True
        if self.skip and stamp == self.floor:
            self.skip -= ends_line
            return True
        if ends_line:
            self.delivered(stamp)
        return False

    def delivered(self, stamp: S) -> None:
        """Move the position past a line stamped ``stamp`` (delivered now).

        Args:
            stamp: the line's stamp.
        """
        if stamp == self.mark:
            self.count += 1
        else:
            self.mark, self.count = stamp, 1


#: The text of a position: ``o{offset}``, ``t{ns}.{count}``, two of the latter joined by
#: ``,`` (stdout's, stderr's), or ``c{container}`` before one. A number has at most 20
#: digits (64 bits).
_POSITION = re.compile(
    r"o(\d{1,20})|c(\d{1,20})t(\d{1,20})\.(\d{1,20})"
    r"|t(\d{1,20})\.(\d{1,20})(?:,t(\d{1,20})\.(\d{1,20}))?"
)


def format_position(position: LogPosition) -> str:
    """The text of ``position`` (see :func:`parse_position`).

    Args:
        position: a log position.
    """
    if isinstance(position, InContainer):
        return f"c{position.container}{format_position(position.at)}"
    if isinstance(position, StampedPair):
        return ",".join(map(format_position, position))
    if isinstance(position, Stamped):
        return f"t{position.ns}.{position.lines}"
    return f"o{position}"


def parse_position(text: str) -> LogPosition:
    """The position :func:`format_position` wrote as ``text``.

    Args:
        text: ``o{offset}``, ``t{ns}.{count}``, ``t{ns}.{count},t{ns}.{count}`` or
            ``c{container}t{ns}.{count}``.

    Raises:
        ValueError: ``text`` is not of that form.
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
