"""``local_docker``'s log positions: the engine's stamp of the last line and a count.

Reading again from any block's position (the engine's ``since``, inclusive, then the
lines the position counts at that stamp dropped) gives that block's lines first, then the
rest: lines sharing a stamp, a line the engine split into frames, pieces of a line cut at
the line bound, and an unterminated last line included.
"""

from __future__ import annotations

import pytest

from asynctorchx.schedulers.docker import _log_frames as _logs
from asynctorchx.schedulers.docker._log_frames import POSITION_SCALE, LogLines
from asynctorchx.schedulers.docker._state import rfc3339

T0 = 1_714_564_800 * 1_000_000_000  # 2024-05-01T12:00:00Z in ns
LIMIT = 64  # the line bound here (bytes), so lines are cut into pieces


def frame(at_ns: int, payload: bytes) -> tuple[int, bytes]:
    data = rfc3339(at_ns).encode() + b" " + payload
    return at_ns, bytes([1, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


#: One stream's log as the engine keeps it: (stamp, frame), stamps never going back.
LOG = [
    frame(T0, b"a\n"),
    frame(T0, b"b\n"),  # the same stamp as the line before
    frame(T0 + 5, b"x" * 40),  # a line of 130 bytes in three frames of one stamp,
    frame(T0 + 5, b"y" * 40),  # cut at LIMIT into three pieces
    frame(T0 + 5, b"z" * 49 + b"\n"),
    frame(T0 + 5, b"c\n"),
    frame(T0 + 9, b"d\n"),
    frame(T0 + 9, b"unterminated"),  # the run's last line, without "\n"
]
EXPECTED = ["a\n", "b\n", "x" * 40 + "y" * 24, "y" * 16 + "z" * 48, "z\n", "c\n", "d\n"]


def read(position: int, rereads: bool, chunk: int) -> list[tuple[int, list[str]]]:
    """The blocks (position, lines) of the log read from ``position`` in ``chunk`` bytes."""
    lines = LogLines(None, tty=False, rereads=rereads)
    if position:
        lines.resume_at(position)
    since = lines.begin_request()
    body = b"".join(data for at, data in LOG if since is None or at >= since)
    blocks: list[tuple[int, list[str]]] = []
    buffer = bytearray()
    for start in range(0, len(body), chunk):
        buffer += body[start : start + chunk]
        taken = lines.take(buffer, at_eof=start + chunk >= len(body))
        blocks.append((lines.block_position, taken))
    blocks.append((lines.block_position, lines.flush()))
    return blocks


@pytest.mark.parametrize("rereads", [True, False])
#: 250: a read ends in a piece of the cut line after "b\n" ended in the same read.
@pytest.mark.parametrize("chunk", [1, 7, 30, 250, 1 << 20])
def test_reading_again_from_a_blocks_position_gives_its_lines_then_the_rest(
    monkeypatch: pytest.MonkeyPatch, rereads: bool, chunk: int
) -> None:
    monkeypatch.setattr(_logs, "MAX_LINE_BYTES", LIMIT)
    blocks = read(0, rereads, chunk)
    every = [line for _, block in blocks for line in block]
    assert every == [*EXPECTED, "unterminated"]
    for position, _ in blocks:
        # a reader counts the lines it got from the first block with that position
        first = next(i for i, (at, _) in enumerate(blocks) if at == position)
        before = sum(len(block) for _, block in blocks[:first])
        again = [line for _, lines in read(position, rereads, chunk) for line in lines]
        assert again == every[before:], (position, before)


def test_a_position_is_the_last_lines_stamp_and_how_many_lines_had_it() -> None:
    lines = LogLines(None, tty=False)
    assert lines.position() == 0  # the start
    lines.begin_request()
    lines.take(bytearray(b"".join(data for _, data in LOG[:2])), at_eof=False)
    assert lines.position() == T0 * POSITION_SCALE + 2  # "a\n" and "b\n"
    lines.take(bytearray(b"".join(data for _, data in LOG[2:])), at_eof=True)
    assert lines.flush() == ["unterminated"]
    assert lines.position() == (T0 + 9) * POSITION_SCALE + 2  # "d\n" and "unterminated"
    assert read(lines.position(), rereads=True, chunk=1 << 20) == [(lines.position(), [])] * 2
