"""The engine's log frames of one container as whole lines, per stream, over several requests.

The engine serves a container's log as frames (``GET /containers/{id}/logs``, Docker
Engine API: an 8-byte header per frame unless the container has a TTY), each stamped
with its time (``timestamps=1``). :class:`LogLines` demultiplexes them, drops the frames
a follower's earlier request already consumed, and assembles each stream's whole lines
(the engine splits a line over 16 KiB into several frames). The requests themselves are
made by :mod:`asynctorchx.schedulers.docker._log_follow`.
"""

from __future__ import annotations

import collections
import re

from asynctorchx.schedulers.docker._state import parse_ts_ns, rfc3339
from asynctorchx.schedulers.toolkit import MAX_LINE_BYTES, LineAssembler

#: A log follower re-reads from this long before the newest frame it consumed (ns).
REREAD_NS = 1_000_000_000

#: The most frames a follower remembers for its next request (65,536, about 15 MB): a
#: log written faster than that many lines a second is remembered for less than
#: ``REREAD_NS``, and the next request starts after the frames forgotten, so memory stays
#: bounded whatever the rate (a burst of 1 M lines is stamped within a second or two).
MAX_REMEMBERED_FRAMES = 1 << 16

#: The most bytes of frames a follower remembers (16 MiB, a read at a time): frames of
#: long lines (the engine's 16 KiB) reach it before ``MAX_REMEMBERED_FRAMES``.
MAX_REMEMBERED_BYTES = 16 << 20

#: A frame's identity: its timestamp (ns), stream (1 stdout, 2 stderr), size and hash.
_FrameKey = tuple[int, int, int, int]
#: A TTY frame a follower remembers: its timestamp (ns), stream and payload.
_Frame = tuple[int, int, bytes]
#: A read's frames a follower remembers: a multiplexed body's frames as the engine sent
#: them (bytes, parsed again only when a request is made again), or a TTY body's frames.
_Frames = bytes | list[_Frame]
#: The stream numbers of the engine's multiplexed frame header.
STDOUT, STDERR = 1, 2

#: A position (:meth:`LogLines.position`) is ``stamp_ns * POSITION_SCALE + count``: the
#: engine's stamp of the last line delivered and how many lines with that stamp were.
POSITION_SCALE = 10**6


def _stamp_text(ns: int) -> bytes:
    """``ns`` since the epoch as the engine stamps a log frame: RFC 3339 in UTC with 9
    fraction digits (Docker's ``RFC3339NanoFixed``), 30 bytes."""
    return rfc3339(ns).encode()


#: What :meth:`LogLines._stamp_ns` returns for a stamp that is no time (``0001-01-01...``).
_NO_TIME = -1

#: What the last stamp's second is before any: 19 bytes no stamp starts with.
_NO_SECOND = b"\0" * 19
#: The ns in one unit of a stamp's fraction of ``n`` digits, by ``n``.
_FRACTION_SCALE = tuple(10 ** (9 - digits) for digits in range(10))

_LOG_TS = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ")


class LogLines:
    """Whole log lines from the engine's log frames, over several log requests of one container.

    The engine's log frames carry its timestamp (``timestamps=1``). A follower re-reads
    from a little before the newest frame it consumed (``REREAD_NS``; the engine's
    ``since`` is inclusive and stdout and stderr frames may be stamped slightly out of
    order), and the frames an earlier request consumed are dropped here, so no line is
    lost or repeated. A frame is dropped only as a repeat of an earlier request's frame,
    counted: the engine splits a line over 16 KiB into frames that carry the same
    timestamp and may have the same bytes, and all of them are kept. Each stream's
    frames go to its own :class:`~asynctorchx.schedulers.toolkit.LineAssembler`, so a
    line's end in a later frame (or a later request) is awaited. The assemblers are
    bounded as the local logs are: a line longer than
    :data:`~asynctorchx.schedulers.toolkit.MAX_LINE_BYTES` (4 MiB) comes in pieces that
    together are the line (no byte is lost); a shorter one comes whole, however many
    16 KiB frames the engine split it into.

    A follower keeps the bytes of each read's frames as they came (one copy a read, not
    an object a frame); their identities (stamp, stream, size, hash) are parsed and
    counted only when a request is made again, and a frame is looked up only when
    stamped no later than the newest of them.

    Call :meth:`begin_request` before each log request and pass its ``since``.

    Args:
        since_ns: drop frames stamped before this (ns since the epoch), or ``None``.
        tty: the container has a TTY: the body is raw text, not multiplexed frames.
        rereads: later requests may send frames again (a follower), so the frames of the
            last ``REREAD_NS`` are remembered; ``False`` for a single read, which then
            keeps nothing per frame (memory bounded by a block, whatever the log's rate).
    """

    def __init__(self, since_ns: int | None, tty: bool, rereads: bool = True) -> None:
        self.since_ns = since_ns
        self.tty = tty
        self.rereads = rereads
        self.newest_ns: int | None = None
        #: ``newest_ns``, ``since_ns`` and the newest stamp an earlier request consumed as
        #: the engine writes stamps (:func:`_stamp_text`; b"": none), compared as text.
        self._newest_stamp = b""
        self._since_stamp = b"" if since_ns is None else _stamp_text(since_ns)
        self._replay_stamp = b""
        #: The last stamp's whole seconds (``YYYY-MM-DDTHH:MM:SS``) and their ns: stamps
        #: of one second share them, so only the fraction is parsed again.
        self._second: tuple[bytes, int] = (_NO_SECOND, 0)
        #: The frames consumed, a read at a time, oldest first: (the read's newest stamp,
        #: its number of frames, their bytes, the frames); reads older than ``REREAD_NS``
        #: before the newest frame are dropped, then the oldest reads while more than
        #: ``MAX_REMEMBERED_FRAMES`` frames or ``MAX_REMEMBERED_BYTES`` are held.
        self._consumed: collections.deque[tuple[int, int, int, _Frames]] = collections.deque()
        self._consumed_frames = 0
        self._consumed_bytes = 0
        #: Frames of earlier requests the current one has not replayed yet, by count.
        self._replayable: collections.Counter[_FrameKey] = collections.Counter()
        #: The newest stamp among ``_replayable`` (-1: none): only frames stamped no later
        #: are looked up there.
        self._replay_max = -1
        self._assemblers = {
            STDOUT: LineAssembler(MAX_LINE_BYTES),
            STDERR: LineAssembler(MAX_LINE_BYTES),
        }
        #: The newest stamp of the frames forgotten to bound memory (ns), or None.
        self._forgotten_ns: int | None = None
        #: The stamp of the last line ended (as the engine writes it) and how many lines
        #: ended with that stamp: where a read can start again (:meth:`position`).
        self._mark: bytes | bytearray = b""
        self._marks = 0
        #: A resume's start (:meth:`resume_at`): the stamp whose first ``_skip_count``
        #: lines every request drops, and how many it has still to drop.
        self._skip_stamp = b""
        self._skip_count = self._skip_left = 0
        #: Where the lines of the last :meth:`take` or :meth:`flush` start: its
        #: :meth:`position` before, or the block before's if that ended in a piece of a
        #: line cut at the 4 MiB bound (no stamp falls inside a line: the reader counts
        #: the pieces from the line's start).
        self.block_position = 0
        self._cut = False

    def position(self) -> int:
        """Where reading again gives the lines after those taken so far: the stamp of the
        last line ended and how many lines ended with it (0: the start).

        The engine serves a log from a time (``since``, inclusive), and each stream's
        stamps never go back, so a read of one stream from that stamp that drops that
        many lines stamped with it goes on exactly after them (:meth:`resume_at`).
        """
        if not self._mark:
            return 0
        return self._ns_of(self._mark) * POSITION_SCALE + self._marks

    def resume_at(self, position: int) -> None:
        """Start reading after ``position`` (a :meth:`position` of one stream's read).

        Args:
            position: the stamp (ns) times :data:`POSITION_SCALE` plus the lines to drop.
        """
        stamp, self._skip_count = divmod(position, POSITION_SCALE)
        self._skip_stamp = self._mark = _stamp_text(stamp)
        self._marks = self._skip_count
        self.since_ns = stamp if self.since_ns is None else max(stamp, self.since_ns)
        self._since_stamp = _stamp_text(self.since_ns)

    def resume_ns(self) -> int | None:
        """The ``since`` of the next request (ns since the epoch), or ``None`` (the start)."""
        if self.newest_ns is None:
            return self.since_ns
        resume = self.newest_ns - REREAD_NS
        if self._forgotten_ns is not None:  # never ask again for a frame forgotten
            resume = max(resume, self._forgotten_ns + 1)
        return resume if self.since_ns is None else max(resume, self.since_ns)

    def begin_request(self) -> int | None:
        """Start a new log request: return its ``since`` (as :meth:`resume_ns`).

        The frames consumed so far may come again in it; each is dropped once.
        """
        replayable: collections.Counter[_FrameKey] = collections.Counter()
        newest = -1
        for read_newest, _, _, frames in self._consumed:
            newest = max(newest, read_newest)
            replayable.update(self._keys(frames))
        self._replayable = replayable
        self._replay_max = newest
        self._replay_stamp = b"" if newest < 0 else _stamp_text(newest)
        self._skip_left = self._skip_count
        return self.resume_ns()

    def take(self, body: bytearray, at_eof: bool) -> list[str]:
        """Consume the whole frames at the start of ``body``; return the lines they finish.

        Args:
            body: the response body read so far; the consumed frames are removed from it.
            at_eof: the body is complete (a TTY body's last text is then a frame).
        """
        if not self._cut:  # else the block goes on with a cut line: the position stays
            self.block_position = self.position()
        if not self.tty:
            lines = self._take_frames(body)
        else:
            kept: list[_Frame] = []
            lines = []
            for kind, payload in self._frames(body, at_eof):
                lines.extend(self._frame(kind, payload, kept))
            if kept:
                newest = max(stamp for stamp, _, _ in kept)
                size = sum(len(payload) for _, _, payload in kept)
                self._remember(newest, len(kept), size, kept)
        if lines:  # a last line without "\n" is a piece of a line cut at the 4 MiB bound
            self._cut = not lines[-1].endswith("\n")
        return lines

    def _take_frames(self, body: bytearray) -> list[str]:
        """:meth:`take` for a multiplexed body, at the engine's rate.

        The payloads of consecutive frames of one stream are fed to its assembler at
        once (the same lines as frame by frame: an assembler's lines do not depend on
        the chunking), so a block of 100-byte lines is decoded once, not once a line.
        Stamps are compared as the engine writes them (RFC 3339 in UTC with 9 fraction
        digits, fixed width, so the text's order is the time's): a frame of the second
        before is not parsed; another form is parsed and written so
        (:meth:`_frame_stamp_text`). A single read and a follower have a loop each (the
        follower's also drops the frames consumed before and keeps the others' bytes):
        the work is per frame, 1 M frames for 100 MB of 100-byte lines.
        """
        if self.rereads:
            return self._take_frames_again(body)
        run: list[bytearray] = []  # payloads of consecutive frames of one stream
        lines: list[str] = []
        run_kind = STDOUT
        since, second = self._since_stamp, self._second[0] + b"."
        newest: bytes | bytearray = self._newest_stamp
        mark, marks = self._mark, self._marks
        stamp: bytes | bytearray  # as the engine writes it; b"": none
        pos, size = 0, len(body)
        while size - pos >= 8:  # header: stream, 0, 0, 0, big-endian payload size
            start = pos + 8
            end = start + int.from_bytes(body[pos + 4 : start], "big")
            if end > size:
                break
            kind = body[pos] if body[pos] == STDERR else STDOUT
            pos = end
            if (
                end - start > 30
                and body[start + 30] == 0x20  # " "
                and body[start + 29] == 0x5A  # "Z"
                and body.startswith(second, start)
                and body[start + 20 : start + 29].isdigit()
            ):
                stamp, begin = body[start : start + 30], start + 31
            else:
                stamp, begin = self._frame_stamp_text(body, start, end)
                second = self._second[0] + b"."
            if stamp:  # b"": no stamp
                if stamp < since:
                    continue
                if self._skip_left and self._skipped(stamp, body[end - 1] == 0x0A):
                    continue  # delivered before the resume
                if body[end - 1] == 0x0A:  # a line ends: the position moves on
                    mark, marks = stamp, (marks + 1 if stamp == mark else 1)
                if stamp > newest:
                    newest = stamp
            if kind != run_kind and run:
                lines += self._assemblers[run_kind].feed(b"".join(run))
                run = []
            run_kind = kind
            run.append(body[begin:end])
        self._set_newest(newest)
        self._mark, self._marks = mark, marks
        return lines + self._end_take(body, pos, run_kind, run)

    def _take_frames_again(self, body: bytearray) -> list[str]:
        """:meth:`_take_frames` for a follower: frames consumed by an earlier request are
        dropped (counted), the others' bytes remembered, one copy per span of
        consecutive frames kept."""
        run: list[bytearray] = []  # payloads of consecutive frames of one stream
        lines: list[str] = []
        run_kind = STDOUT
        since, second = self._since_stamp, self._second[0] + b"."
        newest: bytes | bytearray = self._newest_stamp
        replay = self._replay_stamp
        mark, marks = self._mark, self._marks
        spans: list[tuple[int, int]] = []  # the spans of body kept
        kept_from = kept_to = kept = 0  # the current span, and the frames kept
        kept_newest: bytes | bytearray = b""
        stamp: bytes | bytearray  # as the engine writes it; b"": none
        pos, size = 0, len(body)
        while size - pos >= 8:  # header: stream, 0, 0, 0, big-endian payload size
            start = pos + 8
            end = start + int.from_bytes(body[pos + 4 : start], "big")
            if end > size:
                break
            kind = body[pos] if body[pos] == STDERR else STDOUT
            frame_start, pos = pos, end
            if (
                end - start > 30
                and body[start + 30] == 0x20  # " "
                and body[start + 29] == 0x5A  # "Z"
                and body.startswith(second, start)
                and body[start + 20 : start + 29].isdigit()
            ):
                stamp, begin = body[start : start + 30], start + 31
            else:
                stamp, begin = self._frame_stamp_text(body, start, end)
                second = self._second[0] + b"."
            payload = body[begin:end]
            if stamp:  # b"": no stamp
                if stamp < since:
                    continue
                if (
                    stamp <= replay and self._replayed(self._ns_of(stamp), kind, bytes(payload))
                ) or (self._skip_left and self._skipped(stamp, body[end - 1] == 0x0A)):
                    continue  # consumed in an earlier request, or before the resume
                if body[end - 1] == 0x0A:  # a line ends: the position moves on
                    mark, marks = stamp, (marks + 1 if stamp == mark else 1)
                if frame_start != kept_to:  # a frame was dropped: a new span
                    spans.append((kept_from, kept_to))
                    kept_from = frame_start
                kept_to = end
                kept += 1
                if stamp > kept_newest:
                    kept_newest = stamp
            if kind != run_kind and run:
                lines += self._assemblers[run_kind].feed(b"".join(run))
                run = []
            run_kind = kind
            run.append(payload)
        self._set_newest(max(newest, kept_newest))
        self._mark, self._marks = mark, marks
        if kept:
            spans.append((kept_from, kept_to))
            self._keep(body, spans, kept, kept_newest)
        return lines + self._end_take(body, pos, run_kind, run)

    def _set_newest(self, newest: bytes | bytearray) -> None:
        """Make ``newest`` (a stamp as the engine writes it) the newest consumed."""
        if newest != self._newest_stamp:
            self._newest_stamp = bytes(newest)
            self.newest_ns = self._ns_of(newest)

    def _end_take(self, body: bytearray, pos: int, kind: int, run: list[bytearray]) -> list[str]:
        """End a take: ``body`` loses its first ``pos`` bytes (the frames consumed), and
        the lines of the last ``run`` of payloads (of stream ``kind``) are returned."""
        del body[:pos]
        return self._assemblers[kind].feed(b"".join(run)) if run else []

    def _keep(
        self, body: bytearray, spans: list[tuple[int, int]], count: int, newest: bytes | bytearray
    ) -> None:
        """Remember the ``count`` frames of ``body`` in ``spans`` (the newest stamped
        ``newest``, as the engine writes it), one read's frames."""
        frames = b"".join([body[begin:end] for begin, end in spans if end > begin])
        self._remember(self._ns_of(newest), count, len(frames), frames)

    def _frame_stamp_text(self, body: bytes | bytearray, start: int, end: int) -> tuple[bytes, int]:
        """:meth:`_frame_stamp`, the stamp written as the engine writes it (b"": none)."""
        stamp, begin = self._frame_stamp(body, start, end)
        return (b"" if stamp is None else _stamp_text(stamp)), begin

    def _ns_of(self, stamp: bytes | bytearray) -> int:
        """The ns since the epoch of a stamp as the engine writes it (:func:`_stamp_text`)."""
        second, second_ns = self._second
        if stamp.startswith(second):
            return second_ns + int(stamp[20:29])
        ns = self._stamp_ns(bytes(stamp))
        return -1 if ns is None else ns

    def _frame_stamp(self, body: bytes | bytearray, start: int, end: int) -> tuple[int | None, int]:
        """The stamp (ns; None: none, or the engine's zero time) of the frame
        ``body[start:end]`` and where its payload starts; a stamp of the same second as
        the one before is read from its fraction alone."""
        space = body.find(b" ", start, min(start + 40, end))
        if space < 0:
            return None, start
        second, second_ns = self._second
        if (
            space - start > 20
            and body[space - 1] == 0x5A  # "Z"
            and body[start + 19] == 0x2E  # "."
            and body.startswith(second, start)
        ):
            fraction = body[start + 20 : space - 1]
            if len(fraction) <= 9 and fraction.isdigit():
                return second_ns + int(fraction) * _FRACTION_SCALE[len(fraction)], space + 1
        stamp = self._stamp_ns(bytes(body[start:space]))
        if stamp is None:  # not a stamp: the whole frame is the payload
            return None, start
        return (None if stamp == _NO_TIME else stamp), space + 1

    def worth_draining(self, stopped_ns: int) -> bool:
        """Whether to read on a follow after the container stopped at ``stopped_ns``.

        A read starts at :meth:`resume_ns`, so it sends again what was consumed since
        then, and the engine (``json-file``) decodes and skips every entry before it
        again. After a burst (the follower forgot frames to stay within
        ``MAX_REMEMBERED_FRAMES``), that is the whole log so far plus 65,536 frames
        served again: the follow is read on to its end (a follow of 1 M lines stopped at
        a third ran at 13.0 MB/s read on, 8.9 MB/s switched to a read: medians of 5
        pairs, issue 15). Otherwise the follow is read on when what it has left (stamped
        from the newest frame consumed to the stop) spans less time than what a read
        would send again. A choice of speed only: no line is lost or repeated either way.

        Args:
            stopped_ns: when the engine saw the container stop (the event's ``timeNano``),
                in ns since the epoch; 0 when unknown.
        """
        newest, resume = self.newest_ns, self.resume_ns()
        if newest is None or resume is None or stopped_ns <= 0:
            return False
        if self._forgotten_ns is not None:  # a burst: a read would re-scan it all
            return True
        return stopped_ns - newest < newest - resume

    def last_keys(self, count: int) -> list[_FrameKey]:
        """The identities of the last ``count`` frames consumed (or fewer), oldest first.

        Args:
            count: how many.
        """
        keys: list[_FrameKey] = []
        for *_, frames in reversed(self._consumed):
            if len(keys) >= count:
                break
            keys[:0] = self._keys(frames)
        return keys[len(keys) - count :] if len(keys) > count else keys

    def _keys(self, frames: _Frames) -> list[_FrameKey]:
        """The identities of a remembered read's frames, in order."""
        if isinstance(frames, list):
            return [(stamp, kind, len(payload), hash(payload)) for stamp, kind, payload in frames]
        return [key for key in self.frame_keys(frames) if key is not None]

    def frame_keys(self, body: bytes | bytearray) -> list[_FrameKey | None]:
        """The identities of a multiplexed ``body``'s whole frames (None: no stamp), in order.

        Args:
            body: a log response's body.
        """
        keys: list[_FrameKey | None] = []
        pos, size = 0, len(body)
        while size - pos >= 8:
            start = pos + 8
            end = start + int.from_bytes(body[pos + 4 : start], "big")
            if end > size:
                break
            kind = body[pos] if body[pos] == STDERR else STDOUT
            stamp, begin = self._frame_stamp(body, start, end)
            payload = bytes(body[begin:end])
            keys.append(None if stamp is None else (stamp, kind, len(payload), hash(payload)))
            pos = end
        return keys

    def _replayed(self, stamp: int, kind: int, payload: bytes) -> bool:
        """Whether the frame is one an earlier request consumed (then it is counted off)."""
        key = (stamp, kind, len(payload), hash(payload))
        count = self._replayable.get(key)
        if not count:
            return False
        self._replayable[key] = count - 1
        return True

    def _stamp_ns(self, text: bytes) -> int | None:
        """A frame's stamp (RFC 3339, as ``parse_ts_ns``) in ns; None: the text is not a
        stamp; :data:`_NO_TIME`: a stamp of no time (the engine's zero time)."""
        second, second_ns = self._second
        if text[:19] == second and text[-1:] == b"Z":
            fraction = text[20:-1]
            if len(text) == 20:
                return second_ns
            if text[19:20] == b"." and 0 < len(fraction) <= 9 and fraction.isdigit():
                return second_ns + int(fraction.ljust(9, b"0"))
        if _LOG_TS.match(text + b" ") is None:
            return None
        stamp = parse_ts_ns(text.decode())
        if stamp is None:
            return _NO_TIME
        if text[-1:] == b"Z":
            whole = parse_ts_ns(text[:19].decode() + "Z")
            if whole is not None:
                self._second = (text[:19], whole)
        return stamp

    def flush(self) -> list[str]:
        """Return the unfinished line of each stream as it is (a run's end), and forget it.

        The line ends there: the position moves past it (its last frame, the newest).
        """
        self.block_position = self.position()
        self._cut = False
        lines = [line for assembler in self._assemblers.values() for line in assembler.flush()]
        if lines and self._newest_stamp:
            if self._newest_stamp == self._mark:
                self._marks += 1
            else:
                self._mark, self._marks = self._newest_stamp, 1
        return lines

    def _frames(self, body: bytearray, at_eof: bool) -> list[tuple[int, bytes]]:
        """A TTY body's frames: raw text, one frame a line."""
        frames: list[tuple[int, bytes]] = []
        start = 0
        while (end := body.find(b"\n", start)) >= 0:
            frames.append((STDOUT, bytes(body[start : end + 1])))
            start = end + 1
        if at_eof and start < len(body):
            frames.append((STDOUT, bytes(body[start:])))
            start = len(body)
        del body[:start]
        return frames

    def _frame(self, kind: int, payload: bytes, kept: list[_Frame]) -> list[str]:
        match = _LOG_TS.match(payload)
        if match is not None:
            stamp = parse_ts_ns(match.group(1).decode())
            payload = payload[match.end() :]
            if stamp is not None:
                if self.since_ns is not None and stamp < self.since_ns:
                    return []
                if stamp <= self._replay_max and self._replayed(stamp, kind, payload):
                    return []  # consumed in an earlier request
                text, ends_line = _stamp_text(stamp), payload.endswith(b"\n")
                if self._skip_left and self._skipped(text, ends_line):
                    return []  # delivered before the resume
                if ends_line:
                    self._marks = self._marks + 1 if text == self._mark else 1
                    self._mark = text
                if self.rereads:
                    kept.append((stamp, kind, payload))
                if self.newest_ns is None or stamp > self.newest_ns:
                    self.newest_ns = stamp
                    self._newest_stamp = _stamp_text(stamp)
        return self._assemblers[kind].feed(payload)

    def _skipped(self, stamp: bytes | bytearray, ends_line: bool) -> bool:
        """Whether a frame stamped ``stamp`` is one of the lines (or a piece of one) a
        resume drops (:meth:`resume_at`); each dropped line is counted off."""
        if stamp != self._skip_stamp:
            return False
        self._skip_left -= ends_line
        return True

    def _remember(self, newest: int, count: int, size: int, frames: _Frames) -> None:
        """Remember one read's ``count`` frames (``size`` bytes, the newest stamped
        ``newest``); forget the reads ``REREAD_NS`` older than the newest frame, then the
        oldest reads while more than ``MAX_REMEMBERED_FRAMES`` or ``MAX_REMEMBERED_BYTES``
        are held (the next request starts after the newest frame forgotten)."""
        self._consumed.append((newest, count, size, frames))
        self._consumed_frames += count
        self._consumed_bytes += size
        assert self.newest_ns is not None  # set by the frames kept
        horizon = self.newest_ns - REREAD_NS
        while self._consumed and (
            self._consumed[0][0] < horizon
            or self._consumed_frames > MAX_REMEMBERED_FRAMES
            or self._consumed_bytes > MAX_REMEMBERED_BYTES
        ):
            read_newest, read_frames, read_bytes, _ = self._consumed.popleft()
            self._consumed_frames -= read_frames
            self._consumed_bytes -= read_bytes
            if read_newest >= horizon and (
                self._forgotten_ns is None or read_newest > self._forgotten_ns
            ):
                self._forgotten_ns = read_newest
