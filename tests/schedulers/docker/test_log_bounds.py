"""``local_docker``'s log lines are bounded as local logs are, and a follower knows its end.

Bodies are shaped as ``GET /containers/{id}/logs`` with ``timestamps=1`` returns them
(Docker Engine API): an 8-byte header per frame, then ``<RFC 3339 time> <payload>``; the
engine splits a line over 16 KiB into frames of one timestamp.
"""

from __future__ import annotations

from asynctorchx.schedulers.docker._log_frames import LogLines
from asynctorchx.schedulers.docker._state import rfc3339
from asynctorchx.schedulers.toolkit import MAX_LINE_BYTES

T0 = 1_714_564_800 * 1_000_000_000  # 2024-05-01T12:00:00Z in ns
STDOUT = 1


def frame(at_ns: int, payload: bytes) -> bytes:
    data = rfc3339(at_ns).encode() + b" " + payload
    return bytes([STDOUT, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


def engine_frames(at_ns: int, line: bytes) -> list[bytes]:
    """``line`` as the engine serves it: 16 KiB frames, all stamped ``at_ns``."""
    return [frame(at_ns, line[i : i + 16384]) for i in range(0, len(line), 16384)]


def read(lines: LogLines, body: bytes) -> list[str]:
    lines.begin_request()
    return lines.take(bytearray(body), at_eof=True) + lines.flush()


def test_a_line_over_the_limit_comes_in_pieces_that_are_the_whole_line() -> None:
    long = ("é" * (MAX_LINE_BYTES // 2 + 1000)).encode() + b"\n"  # 2-byte characters
    for rereads in (True, False):
        got = read(LogLines(None, tty=False, rereads=rereads), b"".join(engine_frames(T0, long)))
        assert len(got) == 2
        assert all(len(piece.encode()) <= MAX_LINE_BYTES for piece in got)
        assert "".join(got).encode() == long  # cut between characters, no byte lost


def test_a_line_under_the_limit_split_by_the_engine_comes_whole() -> None:
    long = b"x" * (MAX_LINE_BYTES - 1) + b"\n"
    body = b"".join([*engine_frames(T0, long), frame(T0 + 1, b"next\n")])
    got = read(LogLines(None, tty=False), body)
    assert got == [long.decode(), "next\n"]


def test_a_follower_recognises_the_end_of_the_log_it_consumed() -> None:
    frames = [frame(T0 + i, f"line {i}\n".encode()) for i in range(40)]
    lines = LogLines(None, tty=False)
    lines.begin_request()
    assert len(lines.take(bytearray(b"".join(frames)), at_eof=False)) == 40
    expected = lines.last_keys(32)
    assert len(expected) == 32
    # the engine's `tail=32` of the log as it is: the same frames, nothing after them
    assert lines.frame_keys(bytearray(b"".join(frames[-32:]))) == expected
    # a log that went on (or a follow that ended early) does not match
    more = [*frames[-31:], frame(T0 + 40, b"line 40\n")]
    assert lines.frame_keys(bytearray(b"".join(more))) != expected
    assert LogLines(None, tty=False).last_keys(32) == []  # nothing consumed: no check


def test_a_follower_reads_on_after_the_stop_only_when_near_the_log_end() -> None:
    lines = LogLines(None, tty=False)
    lines.begin_request()
    frames = [frame(T0 + i * 100_000_000, f"line {i}\n".encode()) for i in range(20)]  # 2 s
    lines.take(bytearray(b"".join(frames)), at_eof=False)
    newest = T0 + 19 * 100_000_000
    assert lines.worth_draining(newest + 200_000_000)  # 0.2 s left to send < 1 s to re-read
    assert not lines.worth_draining(newest + 3_000_000_000)  # far behind: read the rest
    assert not lines.worth_draining(0)  # the stop's time unknown
    assert not LogLines(None, tty=False).worth_draining(newest)  # nothing consumed
