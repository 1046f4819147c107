"""An in-memory scheduler for layering tests: it counts its instances and closes.

Its apps succeed as soon as they are scheduled; ``describe`` knows them, ``wait``
is the base class's polling fallback (every app is already terminal).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

from asynctorchx.schedulers.api import (
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
)
from asynctorchx.schedulers.toolkit import LogBlock, LogQuery
from asynctorchx.specs.api import AppDef, AppDryRunInfo, AppState, CfgVal, runopts


def fake_run_opts() -> runopts:
    opts = runopts()
    opts.add("flag", type_=bool, help="a bool option", default=False)
    opts.add("label", type_=str, help="a str option", default="none")
    return opts


class FakeScheduler(Scheduler[AppDef]):
    """Counts instances (``created``) and closes (``closed``) in class-level lists."""

    created: ClassVar[list[FakeScheduler]] = []
    closed: ClassVar[list[FakeScheduler]] = []

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("fake", session_name)
        self.apps: dict[str, AppDef] = {}
        FakeScheduler.created.append(self)

    async def close(self) -> None:
        if self not in FakeScheduler.closed:
            FakeScheduler.closed.append(self)

    def _run_opts(self) -> runopts:  # TorchX's form: an instance method
        return fake_run_opts()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[AppDef]:
        return AppDryRunInfo(app, repr)

    async def schedule(self, dryrun_info: AppDryRunInfo[AppDef]) -> str:
        app_id = f"{dryrun_info.request.name}-{len(self.apps)}"
        self.apps[app_id] = dryrun_info.request
        return app_id

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        if app_id not in self.apps:
            return None
        return DescribeAppResponse(app_id=app_id, state=AppState.SUCCEEDED)

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        return [ListAppResponse(app_id=a, state=AppState.SUCCEEDED) for a in self.apps]

    async def _cancel_existing(self, app_id: str) -> None:
        return None

    async def _log_blocks(
        self, app_id: str, query: LogQuery, start: int
    ) -> AsyncIterator[LogBlock]:
        if start == 0:
            yield 0, (f"ran {app_id}\n",)


class ClassOptsScheduler(FakeScheduler):
    """The same, with its run options readable from the class."""

    capabilities = Capabilities(run_opts=fake_run_opts)


class InProcessScheduler(FakeScheduler):
    """The same, claiming that its apps live in the submitting process."""

    capabilities = Capabilities(apps_live_in_process=True)


def create_fake(session_name: str, **kwargs: Any) -> FakeScheduler:
    """A factory that exposes no capabilities."""
    return FakeScheduler(session_name, **kwargs)


def create_class_opts(session_name: str, **kwargs: Any) -> ClassOptsScheduler:
    """A factory that exposes its class's capabilities."""
    return ClassOptsScheduler(session_name, **kwargs)


create_class_opts.capabilities = ClassOptsScheduler.capabilities  # type: ignore[attr-defined]


def create_in_process(session_name: str, **kwargs: Any) -> InProcessScheduler:
    """A factory of :class:`InProcessScheduler` that exposes its capabilities."""
    return InProcessScheduler(session_name, **kwargs)


create_in_process.capabilities = InProcessScheduler.capabilities  # type: ignore[attr-defined]
