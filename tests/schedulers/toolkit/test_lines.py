"""Bytes to lines: any chunking of any byte stream gives the same lines."""

from __future__ import annotations

import itertools

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
