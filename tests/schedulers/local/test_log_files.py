"""The local schedulers' log reader on files built byte by byte: what crosses a read boundary.

The reader is the toolkit's ``tail_file``, as ``LocalScheduler.log_iter`` calls it.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from asynctorchx.schedulers.toolkit import READ_SIZE, LogQuery, tail_file


async def read_all(path: Path, regex: str | None = None) -> list[str]:
    done = anyio.Event()
    done.set()
    return [
        line
        async for line in tail_file(
            str(path), LogQuery("worker", regex=regex), wake=lambda: done, is_finished=lambda: True
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
