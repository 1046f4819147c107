"""The Scheduler base class's polling fallback, for backends that have no events.

No such backend (Slurm, Kubernetes) can run here, so a fake stands in: its
``describe`` answers the next of a scripted list of states on each call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from asynctorchx.errors import InvalidAppDefException, InvalidNameException
from asynctorchx.schedulers import get_scheduler_factories
from asynctorchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler
from asynctorchx.schedulers.toolkit import LogBlock, LogQuery
from asynctorchx.specs.api import AppDef, AppDryRunInfo, AppState, CfgVal, RetryPolicy, Role


class FakeEventlessScheduler(Scheduler[str]):
    """Knows one app, ``app``, whose state is the next scripted one at each ``describe``."""

    def __init__(self, states: list[AppState]) -> None:
        super().__init__("fake_eventless", "test")
        self.states = states
        self.describes = 0

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        if app_id != "app":
            return None
        state = self.states[min(self.describes, len(self.states) - 1)]
        self.describes += 1
        return DescribeAppResponse(app_id=app_id, state=state)

    async def schedule(self, dryrun_info: AppDryRunInfo[str]) -> str:
        return "app"

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[str]:
        return AppDryRunInfo("request", str)

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        return []

    async def _cancel_existing(self, app_id: str) -> None:
        pass

    async def _log_blocks(
        self, app_id: str, query: LogQuery, start: int
    ) -> AsyncIterator[LogBlock]:
        raise ValueError("no logs")
        yield 0, ()  # an async generator, as every backend's


RUN = AppState.RUNNING


def test_a_backend_that_reads_no_logs_says_so_when_asked_for_logs() -> None:
    class NoLogs(Scheduler[str]):  # as TorchX allows: its log_iter raises by default
        async def describe(self, app_id: str) -> DescribeAppResponse | None:
            return None

        async def schedule(self, dryrun_info: AppDryRunInfo[str]) -> str:
            return "app"

        def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[str]:
            return AppDryRunInfo("request", str)

        async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
            return []

        async def _cancel_existing(self, app_id: str) -> None:
            pass

    scheduler = NoLogs("no_logs", "test")
    with pytest.raises(NotImplementedError, match="NoLogs does not support application log"):
        scheduler.log_iter("app", "role")
    with pytest.raises(NotImplementedError, match="NoLogs does not support application log"):
        scheduler.log_blocks("app", LogQuery("role"))


async def test_wait_polls_until_the_first_terminal_state() -> None:
    scheduler = FakeEventlessScheduler([AppState.PENDING, RUN, RUN, AppState.SUCCEEDED, RUN])
    response = await scheduler.wait("app")
    assert response is not None
    assert response.state == AppState.SUCCEEDED
    assert scheduler.describes == 4


async def test_wait_for_state_change_returns_at_the_first_other_state() -> None:
    scheduler = FakeEventlessScheduler([RUN, RUN, AppState.FAILED])
    response = await scheduler.wait_for_state_change("app", RUN)
    assert response is not None
    assert response.state == AppState.FAILED
    pending = FakeEventlessScheduler([RUN])
    response = await pending.wait_for_state_change("app", AppState.PENDING)
    assert response is not None
    assert (response.state, pending.describes) == (RUN, 1)


async def test_unknown_app_is_none_and_a_timeout_raises() -> None:
    scheduler = FakeEventlessScheduler([RUN])
    assert await scheduler.wait("other") is None
    assert await scheduler.wait_for_state_change("other", RUN) is None
    with pytest.raises(TimeoutError):
        await scheduler.wait("app", timeout=0.01)  # never terminal: only the timeout ends it


@pytest.mark.parametrize("backend", ["local_cwd", "local_dir", "local_docker"])
@pytest.mark.parametrize(
    ("roles", "error"),
    [
        (["worker", "worker"], InvalidAppDefException),  # the second used to replace the first
        (["../../../escape"], InvalidNameException),  # used to write outside log_dir
        (["/abs/path"], InvalidNameException),
        ([], InvalidAppDefException),
    ],
)
def test_every_backend_refuses_the_same_bad_apps_at_dry_run(
    backend: str, roles: list[str], error: type[Exception], tmp_path: Path
) -> None:
    scheduler = get_scheduler_factories()[backend]("test")
    app = AppDef("app", [Role(name, image=str(tmp_path), entrypoint="echo") for name in roles])
    with pytest.raises(error):
        scheduler.submit_dryrun(app, {})
    assert list(tmp_path.iterdir()) == []  # nothing written before the refusal


ALL_BACKENDS = ["local_cwd", "local_dir", "local_docker", "slurm", "kubernetes"]


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_a_retry_policy_the_backend_cannot_honour_is_refused_at_dry_run(
    backend: str, tmp_path: Path
) -> None:
    scheduler = get_scheduler_factories()[backend]("test")
    role = Role("worker", image=str(tmp_path), entrypoint="echo", max_retries=2)
    role.retry_policy = RetryPolicy.ROLE  # TorchX after 0.7.0; no backend restarts a role yet
    cfg = {"queue": "default"} if backend == "kubernetes" else {}  # its one required option
    with pytest.raises(InvalidAppDefException, match=r"'worker' asks for RetryPolicy\.ROLE"):
        scheduler.submit_dryrun(AppDef("app", [role]), cfg)
    role.max_retries = 0  # without retries the policy does not matter
    assert scheduler.submit_dryrun(AppDef("app", [role]), cfg).request is not None


class NewerValidate(FakeEventlessScheduler):
    """TorchX's newer form, ours too: ``_validate(app, scheduler, cfg)``."""

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        self.seen_cfg = dict(cfg)
        if app.name == "refused":
            raise ValueError(f"{scheduler} refuses {app.name}")


def test_validate_is_called_with_the_app_the_backend_and_the_resolved_options() -> None:
    scheduler = NewerValidate([RUN])
    role = Role(name="worker", image="img", entrypoint="echo")
    assert scheduler.submit_dryrun(AppDef(name="ok", roles=[role]), {}).request == "request"
    with pytest.raises(ValueError, match="fake_eventless refuses refused"):
        scheduler.submit_dryrun(AppDef(name="refused", roles=[role]), {})
    assert scheduler.seen_cfg == {}


@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_no_built_in_backend_rewrites_a_public_method_of_the_base(backend: str) -> None:
    # wait, cancel, delete, log_iter... are written once in Scheduler; a backend fills hooks
    cls = type(get_scheduler_factories()[backend]("test"))
    concrete = [
        name
        for name, member in vars(Scheduler).items()
        if callable(member)
        and not name.startswith("_")
        and not getattr(member, "__isabstractmethod__", False)
        # empty defaults a backend fills, as in TorchX: what it holds, its workspace build
        and name not in ("close", "build_workspace_and_update_role", "describe_native")
    ]
    assert {"wait", "wait_for_state_change", "cancel", "delete", "log_iter"} <= set(concrete)
    rewritten = [name for name in concrete if getattr(cls, name) is not getattr(Scheduler, name)]
    assert rewritten == [], f"{cls.__name__} rewrites {rewritten}"


class FailsOnBad(FakeEventlessScheduler):
    """Submits each request as app ``{request}``; refuses the request ``bad``."""

    def __init__(self) -> None:
        super().__init__([AppState.RUNNING])
        self.cancelled: list[str] = []

    async def schedule(self, dryrun_info: AppDryRunInfo[str]) -> str:
        if dryrun_info.request == "bad":
            raise ValueError("refused")
        return "app"

    async def _cancel_existing(self, app_id: str) -> None:
        self.cancelled.append(app_id)


async def test_schedule_many_returns_ids_in_order_and_cancels_them_when_one_submit_fails() -> None:
    scheduler = FailsOnBad()
    assert await scheduler.schedule_many([AppDryRunInfo("ok", str)] * 2) == ["app", "app"]
    with pytest.raises(ValueError, match="refused"):
        await scheduler.schedule_many([AppDryRunInfo("ok", str), AppDryRunInfo("bad", str)])
    assert scheduler.cancelled == ["app"]
