"""Bytes to text lines: the rule every backend follows.

A line ends at ``\\n`` only and keeps it; bad UTF-8 becomes U+FFFD; with ``max_line_bytes``
a longer line is split at character boundaries, so memory stays bounded and no byte is lost.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

#: The longest line, in bytes (4 MiB), the log writer and readers keep whole.
MAX_LINE_BYTES = 4 << 20
#: The smallest ``max_line_bytes`` accepted: room for one 4-byte UTF-8 character.
MIN_LINE_BYTES = 4


def piece_end(data: bytes | bytearray | memoryview, start: int, limit: int) -> int:
    """Where the first piece (at most ``limit`` bytes) of a long line at ``start`` ends."""
    end = start + limit
    for cut in range(end, max(start, end - 4), -1):
        if data[cut] & 0xC0 != 0x80:
            return cut
    return end


def has_long_line(data: bytes | bytearray | memoryview, end: int, limit: int) -> bool:
    """Whether a line of ``data[:end]`` is over ``limit`` bytes, in ``end / limit`` searches."""
    if isinstance(data, memoryview):
        data = data.tobytes()
    start = 0
    while end - start > limit:
        newline = data.rfind(b"\n", start, start + limit)
        if newline < 0:
            return True
        start = newline + 1
    return False


def line_spans(
    data: bytes | bytearray | memoryview, end: int, limit: int | None
) -> list[tuple[int, int]]:
    """The ``(start, stop)`` offsets of the lines (and pieces of long lines) of ``data[:end]``."""
    if isinstance(data, memoryview):
        data = data.tobytes()
    spans: list[tuple[int, int]] = []
    start = 0
    while start < end:
        stop = data.find(b"\n", start, end) + 1 or end
        if limit is not None:
            while stop - start > limit:
                cut = piece_end(data, start, limit)
                spans.append((start, cut))
                start = cut
        spans.append((start, stop))
        start = stop
    return spans


def iter_lines(data: bytes, max_line_bytes: int | None = None) -> Iterator[str]:
    """The lines of ``data``, made lazily by C code so each is freed while still in cache.

    Args:
        data: lines that each end with ``\\n`` but perhaps the last.
        max_line_bytes: split lines longer than this many bytes (None: no limit).
    """
    if not data:
        return iter(())
    if max_line_bytes is not None and (
        data[-1] != 0x0A
        or (len(data) > max_line_bytes and has_long_line(data, len(data), max_line_bytes))
    ):
        view = memoryview(data)
        return (
            str(view[start:stop], "utf-8", "replace")
            for start, stop in line_spans(data, len(data), max_line_bytes)
        )
    text = io.TextIOWrapper(io.BytesIO(data), "utf-8", "replace", newline="\n")
    # decode the block at once, as the benchmark's floor does (benchmark 5, log_iter)
    text._CHUNK_SIZE = max(len(data), 8192)  # type: ignore[attr-defined]
    return text


class LineAssembler:
    """Assembles the lines of one byte stream fed in chunks of any size, the same lines for any.

    Args:
        max_line_bytes: split longer lines into pieces; None: lines are kept whole.
        offset: the stream's offset of the first byte fed.

    Raises:
        ValueError: ``max_line_bytes`` is under 4.
    """

    __slots__ = ("_limit", "_pending", "_pending_size", "offset")

    def __init__(self, max_line_bytes: int | None = None, offset: int = 0) -> None:
        if max_line_bytes is not None and max_line_bytes < MIN_LINE_BYTES:
            raise ValueError(
                f"max_line_bytes is {max_line_bytes}: give at least {MIN_LINE_BYTES} (bytes),"
                " room for one UTF-8 character"
            )
        self._limit = max_line_bytes
        self._pending: list[bytes] = []
        self._pending_size = 0
        #: The stream's offset of the next line's first byte.
        self.offset = offset

    @property
    def pending_bytes(self) -> int:
        """How many bytes of an unterminated line are held."""
        return self._pending_size

    def take(self, chunk: bytes | bytearray | memoryview) -> bytes:
        """Take the stream's next bytes; return those of the lines (and pieces) they complete."""
        data = bytes(chunk)
        end = data.rfind(b"\n") + 1
        limit = self._limit
        if self._pending:
            if not end and (limit is None or self._pending_size + len(data) <= limit):
                self._pending.append(data)  # joined once, at the line's end
                self._pending_size += len(data)
                return b""
            end += self._pending_size if end else 0
            data = b"".join([*self._pending, data])
        while limit is not None and len(data) - end > limit:
            end = piece_end(data, end, limit)
        self._pending = [data[end:]] if end < len(data) else []
        self._pending_size = len(data) - end
        self.offset += end
        return data if end == len(data) else data[:end]

    def take_rest(self) -> bytes:
        """End the line held (the stream ended, or its writer ended a line there): return it."""
        rest = b"".join(self._pending)
        self._pending = []
        self._pending_size = 0
        self.offset += len(rest)
        return rest

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[str]:
        """Take the stream's next bytes; return the lines they complete, in order."""
        return list(iter_lines(self.take(chunk), self._limit))

    def flush(self) -> list[str]:
        """End the stream: return its unterminated last line (no ``\\n``), if any, and forget it."""
        return list(iter_lines(self.take_rest(), self._limit))
