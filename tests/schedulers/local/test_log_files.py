"""The local schedulers' log reader on files built byte by byte: what crosses a read boundary.

The reader is the toolkit's ``tail_blocks``, as ``LocalScheduler.log_iter`` calls it.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from asynctorchx.schedulers.local._log_files import ReplicaLogWriter, TimeIndex
from asynctorchx.schedulers.toolkit import LogQuery, lines_of, tail_blocks
from asynctorchx.schedulers.toolkit._tail import READ_SIZE


async def read_all(path: Path, regex: str | None = None) -> list[str]:
    done = anyio.Event()
    done.set()
    return [
        line
        async for line in lines_of(
            tail_blocks(
                str(path),
                LogQuery("worker", regex=regex),
                wait_for_change=done.wait,
                is_finished=lambda: True,
            )
        )
    ]


async def test_lines_and_characters_that_straddle_a_read_are_whole(tmp_path: Path) -> None:
    size = READ_SIZE
    euro = "\u20ac".encode()  # 3 bytes: the read boundary falls inside it
    first = b"a" * (size - 1) + euro + b"\n"
    second = b"b" * (size - 1) + b"\n"  # its newline is the first byte of a later read
    long_line = b"c" * (3 * size) + b"\n"  # spans several reads with no newline in them
    path = tmp_path / "combined.log"
    path.write_bytes(first + second + long_line + b"tail")
    assert await read_all(path) == [
        first.decode(),
        second.decode(),
        long_line.decode(),
        "tail",
    ]


async def test_only_newline_ends_a_line_and_bad_bytes_become_replacement(tmp_path: Path) -> None:
    path = tmp_path / "combined.log"
    path.write_bytes(
        b"bar 1\rbar 2\x0bvt\x1cfs \xc2\x85nel \xe2\x80\xa8ls\ncut \xe2\x82\nbad \xff\xfe\n"
    )
    assert await read_all(path) == [
        "bar 1\rbar 2\x0bvt\x1cfs \x85nel \u2028ls\n",
        "cut \ufffd\n",
        "bad \ufffd\ufffd\n",
    ]
    assert await read_all(path, regex="^bad") == ["bad \ufffd\ufffd\n"]


async def test_a_line_over_the_limit_is_read_in_pieces_with_every_byte(tmp_path: Path) -> None:
    limit = 1000
    progress = b"".join(b"\r%d%%" % k for k in range(2000))  # 11 kB, no newline
    path = tmp_path / "stdout.log"
    path.write_bytes(b"short\n" + progress + b"\ndone\n" + progress)
    done = anyio.Event()
    done.set()
    for read_size in (READ_SIZE, 7):  # whole file at once, and a few bytes per read
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("asynctorchx.schedulers.toolkit._tail.READ_SIZE", read_size)
            lines = [
                line
                async for line in lines_of(
                    tail_blocks(
                        str(path),
                        LogQuery("worker"),
                        wait_for_change=done.wait,
                        is_finished=lambda: True,
                        max_line_bytes=limit,
                    )
                )
            ]
        assert "".join(lines).encode() == path.read_bytes()
        assert max(len(line.encode()) for line in lines) == limit
        assert lines[0] == "short\n"
        assert "done\n" in lines
        assert len(lines) == 2 + 2 * -(-len(progress) // limit)


async def test_combined_reads_back_a_long_lines_pieces_with_the_other_streams_lines_between(
    tmp_path: Path,
) -> None:
    limit = 8
    writer = ReplicaLogWriter(str(tmp_path), lambda: None, max_line_bytes=limit)
    progress = "\r1%\r2%\r3%\r4%\ré%\r6%".encode()  # 19 bytes, no newline, a 2-byte character
    for byte in range(len(progress)):  # any chunking: here one byte at a time
        writer.write("stdout", progress[byte : byte + 1])
        assert writer._lines["stdout"].pending_bytes <= limit  # memory stays bounded
    writer.write("stderr", b"an err\n")  # a line of its own, never inside the bar
    writer.write("stdout", b"\r7%\n")
    writer.write("stderr", b"tail")  # the streams' unterminated last lines stay apart
    writer.write("stdout", b"end")
    writer.finish("stderr")
    writer.finish("stdout")
    writer.close()
    assert (tmp_path / "stdout.log").read_bytes() == progress + b"\r7%\nend"
    combined = (tmp_path / "combined.log").read_bytes()
    assert len(combined) == len(progress) + len(b"an err\n\r7%\ntailend")  # nothing added
    done = anyio.Event()
    done.set()
    index = TimeIndex(str(tmp_path / "combined.log.idx"))
    for read_size in (READ_SIZE, 1, 5):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("asynctorchx.schedulers.toolkit._tail.READ_SIZE", read_size)
            lines = [
                line
                async for line in lines_of(
                    tail_blocks(
                        str(tmp_path / "combined.log"),
                        LogQuery("worker"),
                        wait_for_change=done.wait,
                        is_finished=lambda: True,
                        max_line_bytes=limit,
                        cuts=index.cuts,
                    )
                )
            ]
        # a cut piece lacks its "\n" and the next piece of its stream continues it
        assert lines == ["\r1%\r2%\r3", "%\r4%\ré%", "an err\n", "\r6%\r7%\n", "tail", "end"]
