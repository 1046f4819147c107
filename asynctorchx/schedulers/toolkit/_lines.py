"""Bytes to text lines, in one place: newline rule, ``\\r`` and invalid UTF-8 handled once.

The rule every backend follows (TorchX's ``log_iter`` yields lines with their ``\\n``):

- a line ends at ``\\n`` and only there; ``\\r`` (a progress bar's redraw), ``\\x0b``,
  ``\\x1c``... stay inside the line (``str.splitlines`` would split on them);
- each line keeps its ``\\n``; the unterminated text at the end of a stream is a line
  of its own, without ``\\n``, once the stream is over;
- bytes that are not UTF-8 become U+FFFD.

Decoding a block of whole lines at once gives the same text as decoding each line:
``\\n`` is never part of a multi-byte UTF-8 sequence, so no invalid sequence spans two
lines, and one decode per block is several times cheaper than one per line.
"""

from __future__ import annotations


def split_lines(data: bytes | bytearray | memoryview, end: int) -> list[str]:
    """Decode ``data[:end]`` (whole lines: ``data[end - 1]`` is ``\\n``) and split it.

    Args:
        data: bytes holding whole lines up to ``end``.
        end: the offset just after the last ``\\n`` to split at (0: no line).
    """
    if end == 0:
        return []
    pieces = str(memoryview(data)[:end], "utf-8", "replace").split("\n")
    pieces.pop()  # the empty text after the last "\n"
    return [piece + "\n" for piece in pieces]


class LineAssembler:
    """Assembles the lines of ONE byte stream fed in chunks of any size.

    Feeding the same bytes in any chunking gives the same lines. Keep one assembler per
    stream (stdout and stderr each have their own partial line).

    Example::

        assembler = LineAssembler()
        lines = assembler.feed(b"a\\nb")  # ["a\\n"]
        lines += assembler.feed(b"c\\n")  # ["bc\\n"]
        lines += assembler.flush()  # [] (nothing left)
    """

    __slots__ = ("_pending", "_pending_size")

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        self._pending_size = 0

    @property
    def pending_bytes(self) -> int:
        """How many bytes of an unterminated line are held."""
        return self._pending_size

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[str]:
        """Take the next bytes of the stream; return the lines they complete, in order.

        Args:
            chunk: the stream's next bytes (any length, possibly empty).
        """
        data = bytes(chunk)
        end = data.rfind(b"\n") + 1
        if end == 0:  # a long line goes on: keep it, join it once when it ends
            if data:
                self._pending.append(data)
                self._pending_size += len(data)
            return []
        if self._pending:
            self._pending.append(data)
            data = b"".join(self._pending)
            end += self._pending_size
            self._pending = []
            self._pending_size = 0
        lines = split_lines(data, end)
        if end < len(data):
            self._pending = [data[end:]]
            self._pending_size = len(data) - end
        return lines

    def flush(self) -> list[str]:
        """End the stream: return its unterminated last line (no ``\\n``), if any, and forget it."""
        if not self._pending:
            return []
        text = b"".join(self._pending).decode("utf-8", "replace")
        self._pending = []
        self._pending_size = 0
        return [text]
