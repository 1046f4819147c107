"""``local_docker``'s log frames to lines, without an engine: streams, line bounds, requests.

Bodies are shaped as ``GET /containers/{id}/logs`` with ``timestamps=1`` returns them
(Docker Engine API): an 8-byte header per frame (stream, 0, 0, 0, big-endian size), then
``<RFC 3339 time> <payload>``; the engine splits a line over 16 KiB into frames of one
stamp. A follower's next request starts at its position (the engine's ``since`` is
inclusive, so it sends again the frames stamped there), and each line comes once.
"""

from __future__ import annotations

import pytest

from asynctorchx.schedulers.docker._logs import (
    REREAD_NS,
    STDERR,
    STDOUT,
    FrameParser,
)
from asynctorchx.schedulers.toolkit import MAX_LINE_BYTES, format_rfc3339_ns

T0 = 1_714_564_800 * 1_000_000_000  # 2024-05-01T12:00:00Z in ns
BOTH = (STDOUT, STDERR)


def stamped(kind: int, stamp: bytes, payload: bytes) -> bytes:
    data = stamp + b" " + payload
    return bytes([kind, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


def frame(kind: int, at_ns: int, payload: bytes) -> bytes:
    return stamped(kind, format_rfc3339_ns(at_ns).encode(), payload)


def engine_frames(kind: int, at_ns: int, line: bytes) -> bytes:
    """``line`` as the engine serves it: 16 KiB frames, all stamped ``at_ns``."""
    return b"".join(frame(kind, at_ns, line[i : i + 16384]) for i in range(0, len(line), 16384))


def request(lines: FrameParser, log: list[tuple[int, bytes]], chunk: int = 1 << 30) -> list[str]:
    """A request of ``lines`` to an engine holding ``log`` ((stamp, frame) in log order),
    its body taken ``chunk`` bytes at a time."""
    since = lines.begin_request()
    body = b"".join(data for at, data in log if since is None or at >= since)
    got: list[str] = []
    buffer = bytearray()
    for start in range(0, len(body), chunk):
        buffer += body[start : start + chunk]
        got += lines.take(buffer, at_eof=start + chunk >= len(body))
    assert buffer == b""
    return got


def test_interleaved_streams_and_long_lines_come_whole_in_order_in_any_chunking() -> None:
    long = b"y" * (40 * 1024) + b"\n"
    body = b"".join(
        [
            frame(STDOUT, T0, b"out 1\n"),
            engine_frames(STDERR, T0 + 1, long),
            frame(STDOUT, T0 + 2, b"out 2\n"),
            frame(STDOUT, T0 + 3, b"caf\xc3\xa9 \r done\n"),
        ]
    )
    for chunk in (1, 9, 100, len(body)):
        got = request(FrameParser(None, False, BOTH), [(T0, body)], chunk)
        assert got == ["out 1\n", long.decode(), "out 2\n", "caf\xe9 \r done\n"]


def test_a_line_over_the_bound_comes_in_pieces_that_are_the_whole_line() -> None:
    long = ("é" * (MAX_LINE_BYTES // 2 + 1000)).encode() + b"\n"  # 2-byte characters
    got = request(FrameParser(None, False, BOTH), [(T0, engine_frames(STDOUT, T0, long))])
    assert len(got) == 2
    assert not got[0].endswith("\n")  # a cut piece lacks its "\n"
    assert all(len(piece.encode()) <= MAX_LINE_BYTES for piece in got)
    assert "".join(got).encode() == long  # cut between characters, no byte added or lost


def test_a_line_under_the_bound_split_by_the_engine_comes_whole() -> None:
    long = b"x" * (MAX_LINE_BYTES - 1) + b"\n"
    log = [(T0, engine_frames(STDOUT, T0, long)), (T0 + 1, frame(STDOUT, T0 + 1, b"next\n"))]
    assert request(FrameParser(None, False, BOTH), log) == [long.decode(), "next\n"]


def test_frames_before_since_are_dropped_and_a_last_line_is_flushed() -> None:
    lines = FrameParser(T0, False, BOTH)
    log = [(T0 - 1, frame(STDOUT, T0 - 1, b"old\n")), (T0, frame(STDOUT, T0, b"new\nlast"))]
    assert request(lines, [(T0, b"".join(data for _, data in log))]) == ["new\n"]
    assert lines.flush() == ["new\nlast"[4:]]


def test_stamps_in_other_forms_are_compared_by_their_time() -> None:
    old = stamped(STDOUT, b"2024-05-01T12:00:00.4Z", b"old\n")  # T0 + 0.4 s, 1 digit
    at = stamped(STDERR, b"2024-05-01T14:00:00.5+02:00", b"at\n")  # T0 + 0.5 s, offset
    after = frame(STDOUT, T0 + 600_000_000, b"after\n")
    lines = FrameParser(T0 + 500_000_000, False, BOTH)  # since T0 + 0.5 s
    log = [(T0 + 400_000_000, old), (T0 + 500_000_000, at)]
    assert request(lines, log) == ["at\n"]
    assert request(lines, [*log, (T0 + 600_000_000, after)]) == ["after\n"]


def test_a_followers_next_request_drops_what_it_consumed_of_each_stream() -> None:
    # stdout and stderr interleave, lines share stamps, the engine's stamps of the two
    # streams are a little out of order in the log; the first follow ends anywhere
    log = [
        (T0, frame(STDOUT, T0, b"o1\n")),
        (T0, frame(STDOUT, T0, b"o2\n")),
        (T0 + 5, frame(STDERR, T0 + 5, b"e1\n")),
        (T0 + 3, frame(STDOUT, T0 + 3, b"o3\n")),
        (T0 + 5, frame(STDERR, T0 + 5, b"e2\n")),
        (T0 + 6, frame(STDOUT, T0 + 6, b"o4\n")),
    ]
    every = ["o1\n", "o2\n", "e1\n", "o3\n", "e2\n", "o4\n"]
    for cut in range(len(log) + 1):
        lines = FrameParser(None, False, BOTH)
        first = request(lines, log[:cut])
        assert first + request(lines, log) == every, cut


def test_identical_frames_of_a_long_line_over_three_requests_come_once() -> None:
    piece = b"z" * 16384  # the engine splits the line into identical frames of one stamp
    p, q = (T0, frame(STDOUT, T0, piece)), (T0, frame(STDOUT, T0, b"\n"))
    lines = FrameParser(None, False, BOTH)
    assert request(lines, [p]) == []
    assert request(lines, [p, p]) == []  # the first piece again, then the second
    assert request(lines, [p, p, p, q]) == [(piece * 3).decode() + "\n"]


def test_pieces_of_a_cut_line_are_not_repeated_by_the_next_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asynctorchx.schedulers.docker import _logs

    monkeypatch.setattr(_logs, "MAX_LINE_BYTES", 10)
    a, b = (T0, frame(STDOUT, T0, b"a" * 16)), (T0, frame(STDOUT, T0, b"b" * 6 + b"\n"))
    lines = FrameParser(None, False, BOTH)
    assert request(lines, [a]) == ["a" * 10]
    assert request(lines, [a, b]) == ["a" * 6 + "b" * 4, "bb\n"]


def test_a_quiet_stream_is_read_again_from_a_second_before_the_newest_frame() -> None:
    lines = FrameParser(None, False, BOTH)
    request(
        lines,
        [
            (T0, frame(STDERR, T0, b"e\n")),
            (T0 + 5 * REREAD_NS, frame(STDOUT, T0 + 5 * REREAD_NS, b"o\n")),
        ],
    )
    assert lines.begin_request() == T0 + 4 * REREAD_NS


def test_a_tty_body_is_raw_lines_with_their_carriage_returns() -> None:
    body = format_rfc3339_ns(T0).encode() + b" a\r\n" + format_rfc3339_ns(T0 + 1).encode() + b" b"
    lines = FrameParser(None, True, BOTH)
    assert request(lines, [(T0, body)], chunk=7) == ["a\r\n"]
    assert lines.flush() == ["b"]
