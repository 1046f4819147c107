"""Reading a log file back: the lines are the rule's whatever the bytes and the block size."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asynctorchx.schedulers.toolkit import LogQuery, lines_of, tail_blocks
from asynctorchx.schedulers.toolkit._lines import iter_lines

# every line boundary of str.splitlines (only b"\n" may end a line) and broken UTF-8
_PARTS = [
    b"\n",
    b"\r",
    b"\r\n",
    b"\x0b",
    b"\x0c",
    b"\x1c",
    b"\x1d",
    b"\x1e",
    b"\xc2\x85",
    b"\xe2\x80\xa8",
    b"\xe2\x80\xa9",
    b"a",
    b"\xc3\xa9",
    b"\xc3",
    b"\xe2\x80",
    b"\xff",
]
_BYTES = st.lists(st.sampled_from(_PARTS) | st.binary(max_size=6), max_size=80).map(b"".join)


def _expected(data: bytes) -> list[str]:
    """The rule, line by line: split at b"\\n" only, keep it, decode each line alone."""
    pieces = data.split(b"\n")
    lines = [piece.decode("utf-8", "replace") + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1].decode("utf-8", "replace"))
    return lines


@given(_BYTES)
def test_every_other_line_boundary_stays_inside_the_line(data: bytes) -> None:
    whole = data[: data.rfind(b"\n") + 1]
    assert list(iter_lines(whole)) == _expected(whole)
    assert list(iter_lines(data)) == _expected(data)
    assert list(iter_lines(data, 1 << 20)) == _expected(data)


@pytest.mark.parametrize("read_size", [1, 7, 64, 1 << 16])
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_BYTES)
def test_a_file_read_back_in_any_block_size_gives_the_rules_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_size: int, data: bytes
) -> None:
    monkeypatch.setattr("asynctorchx.schedulers.toolkit._tail.READ_SIZE", read_size)
    path = tmp_path / "out.log"
    path.write_bytes(data)

    async def read(regex: str | None) -> list[str]:
        lines = lines_of(
            tail_blocks(
                str(path),
                LogQuery("r", regex=regex),
                wait_for_change=anyio.sleep_forever,
                is_finished=lambda: True,
            )
        )
        return [line async for line in lines]

    assert anyio.run(read, None) == _expected(data)
    assert anyio.run(read, "a") == [line for line in _expected(data) if "a" in line]
