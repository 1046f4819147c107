"""``local_docker``'s log positions: per stream, the engine's stamp of the last line and a count.

Reading again from any block's position (the engine's ``since``, inclusive, then the
lines the position counts at that stamp dropped, per stream) gives that block's lines
first, then the rest: lines sharing a stamp, a line the engine split into frames, pieces
of a line cut at the line bound, an unterminated last line, and, in a combined read, the
other stream's lines stamped a little out of order included.
"""

from __future__ import annotations

import pytest

from asynctorchx.schedulers.docker import _logs
from asynctorchx.schedulers.docker._logs import STDERR, STDOUT, FrameParser
from asynctorchx.schedulers.toolkit import (
    STAMPED_START,
    LogPosition,
    Stamped,
    StampedPair,
    format_rfc3339_ns,
)

T0 = 1_714_564_800 * 1_000_000_000  # 2024-05-01T12:00:00Z in ns
LIMIT = 64  # the line bound here (bytes), so lines are cut into pieces


def frame(at_ns: int, payload: bytes, kind: int = STDOUT) -> tuple[int, int, bytes]:
    data = format_rfc3339_ns(at_ns).encode() + b" " + payload
    return kind, at_ns, bytes([kind, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


#: A container's log as the engine keeps it: (stream, stamp, frame), each stream's stamps
#: never going back, the two streams' a little out of order between them.
LOG = [
    frame(T0, b"a\n"),
    frame(T0 + 1, b"E1\n", STDERR),
    frame(T0, b"b\n"),  # the same stamp as the line before
    frame(T0 + 5, b"x" * 40),  # a line of 130 bytes in three frames of one stamp,
    frame(T0 + 5, b"y" * 40),  # cut at LIMIT into three pieces
    frame(T0 + 1, b"E2\n", STDERR),
    frame(T0 + 5, b"z" * 49 + b"\n"),
    frame(T0 + 5, b"c\n"),
    frame(T0 + 9, b"d\n"),
    frame(T0 + 9, b"E3", STDERR),  # the run's last lines, without "\n"
    frame(T0 + 9, b"unterminated"),
]
CUT = ["x" * 40 + "y" * 24, "y" * 16 + "z" * 48, "z\n"]
STREAMS = {
    (STDOUT,): ["a\n", "b\n", *CUT, "c\n", "d\n", "unterminated"],
    (STDERR,): ["E1\n", "E2\n", "E3"],
    (STDOUT, STDERR): [
        "a\n",
        "E1\n",
        "b\n",
        CUT[0],
        "E2\n",
        *CUT[1:],
        "c\n",
        "d\n",
        "unterminated",
        "E3",
    ],
}


def read(
    streams: tuple[int, ...], position: LogPosition, chunk: int
) -> list[tuple[LogPosition, list[str]]]:
    """The blocks (position, lines) of the log read from ``position`` in ``chunk`` bytes."""
    lines = FrameParser(None, False, streams)
    lines.resume_at(position)
    since = lines.begin_request()
    body = b"".join(f for kind, at, f in LOG if kind in streams and (since is None or at >= since))
    blocks: list[tuple[LogPosition, list[str]]] = []
    buffer = bytearray()
    for start in range(0, len(body), chunk):
        buffer += body[start : start + chunk]
        taken = lines.take(buffer, at_eof=start + chunk >= len(body))
        blocks.append((lines.block_position, taken))
    blocks.append((lines.block_position, lines.flush()))
    return blocks


@pytest.mark.parametrize("streams", list(STREAMS))
#: 250: a read ends in a piece of the cut line after "b\n" ended in the same read.
@pytest.mark.parametrize("chunk", [1, 7, 30, 250, 1 << 20])
def test_reading_again_from_a_blocks_position_gives_its_lines_then_the_rest(
    monkeypatch: pytest.MonkeyPatch, streams: tuple[int, ...], chunk: int
) -> None:
    monkeypatch.setattr(_logs, "MAX_LINE_BYTES", LIMIT)
    blocks = read(streams, 0, chunk)
    every = [line for _, block in blocks for line in block]
    assert every == STREAMS[streams]
    for position, _ in blocks:
        # a reader counts the lines it got from the first block with that position
        first = next(i for i, (at, _) in enumerate(blocks) if at == position)
        before = sum(len(block) for _, block in blocks[:first])
        again = [line for _, lines in read(streams, position, chunk) for line in lines]
        assert again == every[before:], (position, before)


def test_a_position_is_each_streams_last_stamp_and_how_many_lines_had_it() -> None:
    lines = FrameParser(None, False, (STDOUT, STDERR))
    assert lines.position() == StampedPair(STAMPED_START, STAMPED_START)  # the start
    lines.begin_request()
    lines.take(bytearray(b"".join(f for _, _, f in LOG[:3])), at_eof=False)
    # "a" and "b" at T0, "E1\n" at T0 + 1
    assert lines.position() == StampedPair(Stamped(T0, 2), Stamped(T0 + 1, 1))
    lines.take(bytearray(b"".join(f for _, _, f in LOG[3:])), at_eof=True)
    assert lines.flush() == ["unterminated", "E3"]
    # "d\n" and "unterminated" at T0 + 9; "E3" at T0 + 9
    assert lines.position() == StampedPair(Stamped(T0 + 9, 2), Stamped(T0 + 9, 1))
    assert read((STDOUT, STDERR), lines.position(), 1 << 20) == [(lines.position(), [])] * 2


@pytest.mark.parametrize(
    ("streams", "start"),
    [((STDOUT,), StampedPair(STAMPED_START, STAMPED_START)), ((STDOUT, STDERR), Stamped(T0, 1))],
)
@pytest.mark.parametrize("wrong", [7, "t1.1"])
def test_a_position_of_another_read_is_refused_naming_it(
    streams: tuple[int, ...], start: LogPosition, wrong: object
) -> None:
    for given in (start, wrong):
        with pytest.raises(ValueError, match="is not a log position of this local_docker"):
            FrameParser(None, False, streams).resume_at(given)  # type: ignore[arg-type]
