"""LogQuery: what log_iter was asked, validated once."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asynctorchx.schedulers.api import Stream
from asynctorchx.schedulers.toolkit import LogQuery

_REGEXES = st.sampled_from([None, "a", "^b", "c$", r"\d+", "é", "x|y", "[ab]c"])


@given(_REGEXES, st.lists(st.text(alphabet="abcxyé019\r\n", max_size=8), max_size=20))
def test_matches_keeps_exactly_the_lines_re_search_matches(
    regex: str | None, lines: list[str]
) -> None:
    query = LogQuery("trainer", regex=regex)
    kept = [line for line in lines if regex is None or re.search(regex, line)]
    assert [line for line in lines if query.matches(line)] == kept


@given(st.integers(max_value=-1) | st.booleans() | st.floats() | st.text(max_size=3))
def test_a_replica_id_that_is_not_a_non_negative_int_is_refused(k: object) -> None:
    with pytest.raises(ValueError, match="replica id"):
        LogQuery("trainer", k=k)  # type: ignore[arg-type]


def test_streams_accept_values_and_refuse_others_by_name() -> None:
    assert LogQuery("r", streams="stderr").streams is Stream.STDERR  # type: ignore[arg-type]
    assert LogQuery("r").stream_or(Stream.COMBINED) is Stream.COMBINED
    with pytest.raises(ValueError, match="'both' is not a log stream: use one of stdout"):
        LogQuery("r", streams="both")  # type: ignore[arg-type]


def test_a_bad_regex_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"regex '\(' is not a regular expression"):
        LogQuery("r", regex="(")


def test_time_bounds_are_seconds_since_the_epoch() -> None:
    since = datetime(2026, 1, 1, tzinfo=UTC)
    query = LogQuery("r", since=since)
    assert (query.since_timestamp, query.until_timestamp) == (since.timestamp(), None)
    assert query.has_time_bounds
    assert not LogQuery("r").has_time_bounds


def test_unknown_role_and_replica_errors_name_what_exists() -> None:
    counts = {"reader": 1, "trainer": 2}
    LogQuery("trainer", k=1).check_replica("app-1", counts)
    with pytest.raises(ValueError, match="has no role 'writer'; its roles: reader, trainer"):
        LogQuery("writer").check_replica("app-1", counts)
    with pytest.raises(ValueError, match=r"has replicas 0\.\.1, not 2"):
        LogQuery("trainer", k=2).check_replica("app-1", counts)
