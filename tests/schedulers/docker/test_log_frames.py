"""``local_docker``'s log frames to lines at the engine's rate: batching, bounded memory.

Bodies are shaped as ``GET /containers/{id}/logs`` with ``timestamps=1`` returns them
(Docker Engine API): an 8-byte header per frame, then ``<RFC 3339 time> <payload>``.
"""

from __future__ import annotations

import pytest

from asynctorchx.schedulers.docker import _log_frames as _logs
from asynctorchx.schedulers.docker._log_frames import LogLines
from asynctorchx.schedulers.docker._state import rfc3339

T0 = 1_714_564_800 * 1_000_000_000  # 2024-05-01T12:00:00Z in ns
STDOUT, STDERR = 1, 2


def frame(kind: int, at_ns: int, payload: bytes) -> bytes:
    data = rfc3339(at_ns).encode() + b" " + payload
    return bytes([kind, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


@pytest.mark.parametrize("rereads", [True, False])
def test_interleaved_streams_and_long_lines_come_whole_and_in_order(rereads: bool) -> None:
    long = b"y" * (40 * 1024) + b"\n"  # the engine splits it into 16 KiB frames
    frames = [frame(STDOUT, T0, b"out 1\nout ")]
    frames += [frame(STDERR, T0 + 1, long[i : i + 16384]) for i in range(0, len(long), 16384)]
    frames += [frame(STDOUT, T0 + 2, b"2\n"), frame(STDOUT, T0 + 2_000_000_000, b"caf\xc3")]
    frames += [frame(STDOUT, T0 + 2_000_000_001, b"\xa9 \r done\n")]
    body = b"".join(frames)
    for cut in (1, 9, 100, len(body)):  # any split of the body into reads
        lines = LogLines(None, tty=False, rereads=rereads)
        lines.begin_request()
        got: list[str] = []
        buffer = bytearray()
        for start in range(0, len(body), cut):
            buffer += body[start : start + cut]
            got += lines.take(buffer, at_eof=start + cut >= len(body))
        assert got == ["out 1\n", long.decode(), "out 2\n", "caf\xe9 \r done\n"]
        assert buffer == b""


def test_a_follower_remembers_a_bounded_number_of_frames_and_repeats_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_logs, "MAX_REMEMBERED_FRAMES", 4)
    frames = [frame(STDOUT, T0 + i * 1000, f"l{i}\n".encode()) for i in range(11)]
    lines = LogLines(None, tty=False)
    lines.begin_request()
    first = lines.take(bytearray(b"".join(frames[:10])), at_eof=False)
    assert first == [f"l{i}\n" for i in range(10)]
    resume = lines.begin_request()
    assert resume is not None
    assert resume > T0 + 5 * 1000  # after every frame it forgot (all within REREAD_NS)
    # the engine's since is inclusive: it sends again every frame stamped from resume on
    again = [f for i, f in enumerate(frames) if T0 + i * 1000 >= resume]
    assert lines.take(bytearray(b"".join(again)), at_eof=True) == ["l10\n"]


def test_a_follower_remembers_a_bounded_number_of_bytes_and_repeats_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    line = b"y" * (16 * 1024 - 1) + b"\n"  # lines of the engine's largest frame
    monkeypatch.setattr(_logs, "MAX_REMEMBERED_BYTES", 4 * len(frame(STDOUT, T0, line)))
    frames = [frame(STDOUT, T0 + i * 1000, line) for i in range(11)]
    lines = LogLines(None, tty=False)
    lines.begin_request()
    for i in range(10):  # ten reads of one frame each
        assert lines.take(bytearray(frames[i]), at_eof=False) == [line.decode()]
    resume = lines.begin_request()
    assert resume is not None
    assert resume > T0 + 5 * 1000  # after every frame it forgot (all within REREAD_NS)
    again = [f for i, f in enumerate(frames) if T0 + i * 1000 >= resume]
    assert lines.take(bytearray(b"".join(again)), at_eof=True) == [line.decode()]


def test_frames_dropped_inside_a_read_are_not_remembered_twice() -> None:
    # request 1: a, b; request 2 (since is inclusive): a, b again around new c and d;
    # request 3: all four again, then e. Each line comes once, none is lost.
    a, b, c, d, e = (frame(STDOUT, T0 + i, f"{n}\n".encode()) for i, n in enumerate("abcde"))
    lines = LogLines(None, tty=False)
    lines.begin_request()
    assert lines.take(bytearray(a + b), at_eof=False) == ["a\n", "b\n"]
    lines.begin_request()
    assert lines.take(bytearray(c + a + d + b), at_eof=False) == ["c\n", "d\n"]
    lines.begin_request()
    assert lines.take(bytearray(a + b + c + d + e), at_eof=True) == ["e\n"]


def test_identical_frames_of_a_long_line_over_three_requests_come_once_each() -> None:
    piece = b"z" * 16384  # the engine splits the line into identical frames of one stamp
    p, q = frame(STDOUT, T0, piece), frame(STDOUT, T0, b"\n")
    lines = LogLines(None, tty=False)
    lines.begin_request()
    assert lines.take(bytearray(p), at_eof=False) == []
    lines.begin_request()  # sends the first piece again, then the second; then it ends
    assert lines.take(bytearray(p + p), at_eof=False) == []
    lines.begin_request()  # the whole line again
    assert lines.take(bytearray(p + p + p + q), at_eof=True) == [(piece * 3).decode() + "\n"]


def test_a_follower_after_a_burst_reads_on_after_the_stop_however_far_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_logs, "MAX_REMEMBERED_FRAMES", 4)
    frames = [frame(STDOUT, T0 + i * 1000, f"l{i}\n".encode()) for i in range(10)]
    lines = LogLines(None, tty=False)
    lines.begin_request()
    lines.take(bytearray(b"".join(frames[:3])), at_eof=False)
    newest = T0 + 2 * 1000
    assert not lines.worth_draining(newest + 3_000_000_000)  # nothing forgotten yet
    for f in frames[3:]:  # more frames than it remembers: a burst, some forgotten
        lines.take(bytearray(f), at_eof=False)
    assert lines.worth_draining(T0 + 9 * 1000 + 3_000_000_000)
    assert not lines.worth_draining(0)  # the stop's time unknown


def stamped(kind: int, stamp: bytes, payload: bytes) -> bytes:
    """A frame stamped with ``stamp`` as written (not the engine's fixed 9-digit UTC form)."""
    data = stamp + b" " + payload
    return bytes([kind, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


@pytest.mark.parametrize("rereads", [True, False])
def test_stamps_in_other_forms_are_compared_by_their_time(rereads: bool) -> None:
    old = stamped(STDOUT, b"2024-05-01T12:00:00.4Z", b"old\n")  # T0 + 0.4 s, 1 digit
    at = stamped(STDERR, b"2024-05-01T14:00:00.5+02:00", b"at\n")  # T0 + 0.5 s, offset
    after = frame(STDOUT, T0 + 600_000_000, b"after\n")
    lines = LogLines(T0 + 500_000_000, tty=False, rereads=rereads)  # since T0 + 0.5 s
    lines.begin_request()
    assert lines.take(bytearray(old + at), at_eof=False) == ["at\n"]
    assert lines.newest_ns == T0 + 500_000_000
    if rereads:  # a follower's next request sends the frame in the offset form again
        lines.begin_request()
    assert lines.take(bytearray((at if rereads else b"") + after), at_eof=True) == ["after\n"]
    assert lines.newest_ns == T0 + 600_000_000
