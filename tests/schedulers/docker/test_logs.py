"""``local_docker``'s log frames to lines, without an engine.

The bodies are shaped as the Docker Engine API's ``GET /containers/{id}/logs`` with
``timestamps=1`` returns them: an 8-byte header per frame (stream, 0, 0, 0, big-endian
size), then ``<RFC 3339 time> <payload>``.
"""

from __future__ import annotations

from asynctorchx.schedulers.docker._log_frames import REREAD_NS, LogLines
from asynctorchx.schedulers.docker._state import rfc3339

T0 = 1_714_564_800 * 1_000_000_000  # 2024-05-01T12:00:00Z in ns
STDOUT, STDERR = 1, 2


def frame(kind: int, at_ns: int, payload: bytes) -> bytes:
    data = rfc3339(at_ns).encode() + b" " + payload
    return bytes([kind, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


def long_line(at_ns: int, size: int, chunk: int = 16 * 1024) -> list[bytes]:
    """A line of ``size`` ``x`` and its ``\\n``, as the engine splits it: same timestamp."""
    text = b"x" * size + b"\n"
    return [frame(STDOUT, at_ns, text[i : i + chunk]) for i in range(0, len(text), chunk)]


def test_identical_frames_of_one_long_line_are_all_kept() -> None:
    lines = LogLines(None, tty=False)
    lines.begin_request()
    body = bytearray(b"".join(long_line(T0, 100_001)))
    assert lines.take(body, at_eof=True) == ["x" * 100_001 + "\n"]
    assert body == b""


def test_a_re_read_drops_each_frame_consumed_before_once_and_keeps_the_rest() -> None:
    frames = long_line(T0, 7 * 16 * 1024)  # 8 frames: 7 identical, then "\n"
    lines = LogLines(None, tty=False)
    assert lines.begin_request() is None
    # the first request ends after 3 of the frames (the follow was closed)
    assert lines.take(bytearray(b"".join(frames[:3])), at_eof=False) == []
    resume = lines.begin_request()
    assert resume == T0 - REREAD_NS
    # the engine's since is inclusive: the second request sends the 3 frames again
    again = bytearray(b"".join([*frames, frame(STDERR, T0 + 1, b"after\n")]))
    assert lines.take(again, at_eof=True) == ["x" * (7 * 16 * 1024) + "\n", "after\n"]


def test_frames_before_since_are_dropped_and_a_last_line_is_flushed() -> None:
    lines = LogLines(T0, tty=False)
    lines.begin_request()
    body = bytearray(frame(STDOUT, T0 - 1, b"old\n") + frame(STDOUT, T0, b"new\nlast"))
    assert lines.take(body, at_eof=True) == ["new\n"]
    assert lines.flush() == ["last"]
