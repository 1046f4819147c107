"""The log reader's resume rule without I/O: (time, count) across lines and long lines' pieces."""

from __future__ import annotations

import pytest

from asynctorchx.schedulers.kubernetes._apiserver import ApiServer
from asynctorchx.schedulers.kubernetes._logs import LogReader
from asynctorchx.schedulers.toolkit import LogQuery, format_rfc3339_ns
from tests.nightly import run_nightly

T1, T2 = 1_767_225_600_000_000_001, 1_767_225_600_000_000_002
#: What one request returns, as lines: a long line at T1 in three pieces (only the first
#: carries the kubelet's time), then two lines sharing T2.
SENT = [
    f"{format_rfc3339_ns(T1)} head",
    "middle",
    "tail\n",
    f"{format_rfc3339_ns(T2)} x\n",
    f"{format_rfc3339_ns(T2)} y\n",
]
TEXTS = ["head", "middle", "tail\n", "x\n", "y\n"]


def reader() -> LogReader:
    return LogReader(ApiServer(), "default", "c", LogQuery("role0"))


def test_a_read_again_after_any_number_of_lines_yields_the_rest_once() -> None:
    for delivered in range(len(SENT) + 1):
        resumed = reader()
        resumed.begin()
        assert resumed.take(SENT[:delivered]) == TEXTS[:delivered]
        # the connection broke there: the kubelet sends again from sinceTime (inclusive)
        since = resumed.begin()
        again = SENT[3:] if since == format_rfc3339_ns(T2) else SENT
        assert resumed.take(again) == TEXTS[delivered:]


def test_a_new_reader_from_a_position_yields_the_rest_once() -> None:
    for delivered in range(len(SENT) + 1):
        first = reader()
        first.begin()
        assert first.take(SENT[:delivered]) == TEXTS[:delivered]
        resumed = LogReader(ApiServer(), "default", "c", LogQuery("role0"), first.position)
        since = resumed.begin()
        assert (since is None) == (delivered == 0)  # from the log's start, else its time
        again = SENT[3:] if since == format_rfc3339_ns(T2) else SENT
        assert resumed.take(again) == TEXTS[delivered:]


def test_a_position_of_another_kind_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="7 is not a log position of this kubernetes read"):
        LogReader(ApiServer(), "default", "c", LogQuery("role0"), 7)


#: torchx-nightly's lead of a container's lines (its terminal colours off: not a tty)
NIGHTLY_PREFIXES = """
import json, sys
from torchx.schedulers.kubernetes_scheduler import prefix_container_name
print(json.dumps([prefix_container_name(c, "role0", 0) for c in json.load(sys.stdin)]))
"""


def test_another_containers_lines_are_led_by_its_name_as_nightly_leads_them() -> None:
    # the replica's own container's lines as they are, a sidecar's led by its name
    assert run_nightly(NIGHTLY_PREFIXES, ["role0-0", "side-a"]) == ["", "side-a "]
    side = LogReader(ApiServer(), "default", "side-a", LogQuery("role0"), prefix="side-a ")
    side.begin()
    # a long line's later pieces go on its first, so they are not led again
    led = ["side-a head", "middle", "tail\n", "side-a x\n", "side-a y\n"]
    assert side.take(SENT) == led
    matched = LogReader(ApiServer(), "default", "side-a", LogQuery("role0", regex="^x"), 0, "s ")
    matched.begin()
    assert matched.take(SENT) == ["s x\n"]  # the regex sees the line without the lead
