"""Bytes to lines: any chunking of any byte stream gives the same lines."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asynctorchx.schedulers.toolkit import LineAssembler

# bytes rich in newlines, carriage returns and broken UTF-8
_BYTES = st.lists(
    st.sampled_from([b"\n", b"\r", b"a", b"\xc3\xa9", b"\xc3", b"\xa9", b"\xff", b"\xe2\x82\xac"])
    | st.binary(max_size=8),
    max_size=60,
).map(b"".join)


def _expected(data: bytes) -> list[str]:
    """The rule, line by line: split at b"\\n" only, keep it, decode each line alone."""
    pieces = data.split(b"\n")
    lines = [piece.decode("utf-8", "replace") + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1].decode("utf-8", "replace"))
    return lines


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    bounds = [0, *points, len(data)]
    return [data[start:end] for start, end in itertools.pairwise(bounds)]


@given(_BYTES, st.lists(st.integers(min_value=0, max_value=10_000), max_size=20))
def test_any_chunking_gives_the_lines_of_the_whole_stream(data: bytes, cuts: list[int]) -> None:
    assembler = LineAssembler()
    lines: list[str] = []
    fed = b""
    for chunk in _chunks(data, cuts):
        lines.extend(assembler.feed(chunk))
        fed += chunk
        assert assembler.pending_bytes == len(fed) - (fed.rfind(b"\n") + 1)
    lines.extend(assembler.flush())
    assert lines == _expected(data)
    assert assembler.flush() == []
    assert assembler.pending_bytes == 0


def test_carriage_returns_stay_inside_a_line_and_only_newline_ends_one() -> None:
    assembler = LineAssembler()
    assert assembler.feed(b"10%\r50%\r100%\n\x0bnext\x1c") == ["10%\r50%\r100%\n"]
    assert assembler.pending_bytes == len(b"\x0bnext\x1c")
    assert assembler.flush() == ["\x0bnext\x1c"]


def test_a_multibyte_character_split_across_chunks_is_decoded_whole() -> None:
    assembler = LineAssembler()
    assert assembler.feed(b"caf\xc3") == []
    assert assembler.feed(b"\xa9\n") == ["café\n"]


def _expected_pieces(data: bytes, limit: int) -> list[str]:
    """The rule with a limit: each line over ``limit`` bytes cut into pieces of at most
    ``limit`` bytes, at the last byte that does not continue a UTF-8 character (at the
    limit when the 4 bytes up to it all continue one)."""
    pieces: list[bytes] = []
    for line in _byte_lines(data):
        while len(line) > limit:
            cut = next(
                (c for c in range(limit, max(0, limit - 4), -1) if line[c] & 0xC0 != 0x80), limit
            )
            pieces.append(line[:cut])
            line = line[cut:]
        pieces.append(line)
    return [piece.decode("utf-8", "replace") for piece in pieces]


def _byte_lines(data: bytes) -> list[bytes]:
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return [line for line in lines if line]


@given(
    _BYTES,
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
    st.integers(min_value=4, max_value=12),
)
def test_with_a_limit_any_chunking_gives_the_same_pieces_and_every_byte(
    data: bytes, cuts: list[int], limit: int
) -> None:
    assembler = LineAssembler(max_line_bytes=limit)
    lines: list[str] = []
    for chunk in _chunks(data, cuts):
        lines.extend(assembler.feed(chunk))
        assert assembler.pending_bytes <= limit  # memory stays bounded
    lines.extend(assembler.flush())
    assert lines == _expected_pieces(data, limit)
    # no byte lost: the pieces are the lines, cut where no character is
    assert "".join(lines) == "".join(_expected(data))


def test_a_long_line_is_split_only_between_characters() -> None:
    assembler = LineAssembler(max_line_bytes=4)
    euro = "\u20ac"  # 3 bytes
    assert assembler.feed((euro * 3).encode()) == [euro, euro]
    assert assembler.pending_bytes == 3
    assert assembler.feed(b"\n") == [euro + "\n"]
    assert LineAssembler(max_line_bytes=4).feed(b"\r12%\r13%\r14%") == ["\r12%", "\r13%"]
    with pytest.raises(ValueError, match="max_line_bytes"):
        LineAssembler(max_line_bytes=3)
