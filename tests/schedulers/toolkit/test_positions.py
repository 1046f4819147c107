"""Log positions: the codec to cursor text and back, the kind check, and resume-and-skip."""

from __future__ import annotations

import pytest

from asynctorchx.schedulers.toolkit import (
    InContainer,
    LogPosition,
    Stamped,
    StampedPair,
    StampSkip,
    format_position,
    parse_position,
    position_of,
)

NS = 1_714_564_800_123_456_789


@pytest.mark.parametrize(
    ("position", "text"),
    [
        (0, "o0"),
        (123_456, "o123456"),
        (Stamped(0, 0), "t0.0"),
        (Stamped(NS, 3), f"t{NS}.3"),
        (StampedPair(Stamped(NS, 1), Stamped(0, 0)), f"t{NS}.1,t0.0"),
        (InContainer(2, Stamped(NS, 1)), f"c2t{NS}.1"),
    ],
)
def test_a_position_is_written_as_text_and_read_back_the_same(
    position: LogPosition, text: str
) -> None:
    assert format_position(position) == text
    assert parse_position(text) == position
    assert type(parse_position(text)) is type(position)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "12",
        f"{NS * 10**6 + 2}",
        "t1",
        "t1.2,o3",
        "o-1",
        "o" + "9" * 21,
        "x1",
        "c1",
        "c1o2",
        "c1t2.3,t4.5",
    ],
)
def test_text_that_is_not_a_position_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="is not a log position") as caught:
        parse_position(text)
    assert repr(text) in str(caught.value)


def test_a_backend_takes_0_or_its_own_kind_of_position() -> None:
    assert position_of(0, Stamped, "kubernetes") is None
    assert position_of(Stamped(NS, 1), Stamped, "kubernetes") == Stamped(NS, 1)
    pair = StampedPair(Stamped(NS, 1), Stamped(NS, 2))
    wrong: list[LogPosition] = [5, pair]
    for given in wrong:
        with pytest.raises(ValueError, match=r"give 0 .* or the position of a block"):
            position_of(given, Stamped, "local_docker")
    with pytest.raises(ValueError, match=r"Stamped\(ns=.*\) is not a log position of this"):
        position_of(Stamped(NS, 1), StampedPair, "local_docker")


def test_a_request_from_the_positions_stamp_drops_what_was_delivered_there() -> None:
    stamps = [1, 2, 2, 2, 3, 3]  # the stamps of a log's lines, several lines sharing one
    whole = StampSkip(0, 0)
    assert not any(whole.repeats(stamp) for stamp in stamps)
    for delivered in range(len(stamps) + 1):
        first = StampSkip(0, 0)
        first.begin(0)
        assert not any(first.repeats(stamp) for stamp in stamps[:delivered])
        # a new reader (another process) from the position: the server sends from its stamp
        again = StampSkip(first.mark, first.count)
        again.begin(first.mark)
        kept = [stamp for stamp in stamps if stamp >= first.mark and not again.repeats(stamp)]
        assert kept == stamps[delivered:]
        assert (again.mark, again.count) == (whole.mark, whole.count) == (3, 2)


def test_the_parts_of_a_line_count_once_at_their_stamp() -> None:
    skip = StampSkip(0, 0)
    assert not skip.repeats(2, ends_line=False)
    assert not skip.repeats(2, ends_line=True)
    assert (skip.mark, skip.count) == (2, 1)
    skip.begin(2)  # a request from there sends the line's two parts again: both dropped
    assert skip.repeats(2, ends_line=False)
    assert skip.repeats(2, ends_line=True)
    assert not skip.repeats(2)  # the next line at that stamp is new
    assert (skip.mark, skip.count) == (2, 2)
