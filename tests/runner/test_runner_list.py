"""``Runner.list``: newest first by submit time, apps without one last."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from asynctorchx.runner import Runner
from asynctorchx.schedulers.api import ListAppResponse
from asynctorchx.specs.api import AppState, CfgVal
from asynctorchx.specs.converter import converter, from_json, to_json
from tests.runner.fake_scheduler import FakeScheduler


def _at(hour: int) -> datetime:
    return datetime(2024, 1, 1, hour, tzinfo=UTC)


#: in the scheduler's order: neither by id nor by time
LISTED = [
    ("b", _at(1)),
    ("unknown-1", None),
    ("a", _at(3)),
    ("tie-1", _at(2)),
    ("unknown-2", None),
    ("tie-2", _at(2)),
]


class Timed(FakeScheduler):
    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        return [ListAppResponse(a, AppState.RUNNING, submitted=when) for a, when in LISTED]


def create_timed(session_name: str, **kwargs: Any) -> Timed:
    return Timed(session_name, **kwargs)


async def test_list_is_newest_first_and_apps_without_a_time_last() -> None:
    async with Runner("torchx", {"timed": create_timed}, handle_signals=False) as runner:
        listed = await runner.list("timed")
    assert [a.app_id for a in listed] == ["a", "tie-1", "tie-2", "b", "unknown-1", "unknown-2"]


def test_times_are_iso_8601_in_json_and_read_back() -> None:
    app = ListAppResponse("a", AppState.SUCCEEDED, submitted=_at(1), ended=None)
    assert converter.unstructure(app)["submitted"] == "2024-01-01T01:00:00+00:00"
    assert from_json(to_json(app), ListAppResponse) == app
