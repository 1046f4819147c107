"""The Runner records one usage event per API call (``torchx.runner.events.log_event``)."""

from __future__ import annotations

import json
import logging
from typing import Any
from unittest.mock import patch

import pytest

from asynctorchx.errors import UnknownSchedulerException
from asynctorchx.runner import Runner
from asynctorchx.runner.events import SourceType, TorchxEvent, log_event
from asynctorchx.specs.api import AppDef, Role
from tests.runner.fake_scheduler import create_fake


def _app() -> AppDef:
    return AppDef("app", roles=[Role("r", image="img", entrypoint="echo")])


def _runner() -> Runner:
    return Runner("s", {"fake": create_fake}, handle_signals=False)


async def test_every_api_call_logs_one_event(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="asynctorchx.runner.events")
    async with _runner() as runner:
        handle = await runner.run(_app(), "fake", cfg={"flag": True})
        await runner.status(handle)
        await runner.wait(handle)
        await runner.describe(handle)
        await runner.list("fake")
        async for _ in runner.log_lines(handle, "r"):
            pass
        await runner.cancel(handle)
        await runner.delete(handle)
    events = {e.api: e for e in (TorchxEvent.deserialize(r.getMessage()) for r in caplog.records)}
    for api in ("run", "dryrun", "schedule", "status", "wait", "describe", "list"):
        assert api in events
    for api in ("log_lines", "cancel", "delete"):
        assert api in events
    assert (events["status"].scheduler, events["status"].app_id) == (
        "fake",
        handle.rsplit("/", 1)[-1],
    )
    assert events["run"].runcfg is not None
    assert json.loads(events["run"].runcfg) == {"flag": True}


async def test_the_event_is_logged_at_debug_with_its_timing_and_app_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="asynctorchx.runner.events")
    async with _runner() as runner:
        handle = await runner.run(_app(), "fake")
    logged = [TorchxEvent.deserialize(r.getMessage()) for r in caplog.records]
    (schedule,) = [e for e in logged if e.api == "schedule"]
    assert schedule.scheduler == "fake"
    assert schedule.app_id == handle.rsplit("/", 1)[-1]
    assert schedule.app_image == "img"
    assert schedule.raw_exception is None
    assert schedule.wall_time_usec is not None
    assert schedule.wall_time_usec >= 0
    assert schedule.start_epoch_time_usec is not None
    assert all(r.levelno == logging.DEBUG for r in caplog.records)


async def test_a_failing_call_records_its_exception_and_still_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="asynctorchx.runner.events")
    async with _runner() as runner:
        with pytest.raises(UnknownSchedulerException):
            await runner.status("nope://s/app")
    (event,) = [TorchxEvent.deserialize(r.getMessage()) for r in caplog.records]
    assert event.api == "status"
    assert event.scheduler == "nope"
    assert event.raw_exception is not None
    assert "UnknownSchedulerException" in event.raw_exception


def test_log_event_does_not_swallow_and_events_round_trip() -> None:
    recorded: list[Any] = []
    with (
        patch("asynctorchx.runner.events.record", recorded.append),
        pytest.raises(KeyError),
        log_event("cancel", "local_cwd", "app-1"),
    ):
        raise KeyError("x")
    (event,) = recorded
    assert (event.api, event.scheduler, event.app_id, event.session) == (
        "cancel",
        "local_cwd",
        "app-1",
        "app-1",
    )
    assert TorchxEvent.deserialize(event.serialize()) == event
    assert TorchxEvent.deserialize(event) is event
    assert event.source is SourceType.UNKNOWN


def test_an_event_is_not_serialized_when_debug_is_off(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    serialized: list[TorchxEvent] = []
    real = TorchxEvent.serialize

    def counting(self: TorchxEvent) -> str:
        serialized.append(self)
        return real(self)

    monkeypatch.setattr(TorchxEvent, "serialize", counting)
    caplog.set_level(logging.INFO, logger="asynctorchx.runner.events")
    with log_event("status", "local_cwd", "app-1"):
        pass
    assert serialized == []  # nobody listens: no JSON made for each call
    caplog.set_level(logging.DEBUG, logger="asynctorchx.runner.events")
    with log_event("status", "local_cwd", "app-1"):
        pass
    assert [event.api for event in serialized] == ["status"]
    assert TorchxEvent.deserialize(caplog.records[-1].getMessage()).app_id == "app-1"
