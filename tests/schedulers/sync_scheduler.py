"""A small, real, synchronous scheduler, written as a TorchX scheduler ported by import.

:class:`PortedScheduler` is what a TorchX user's scheduler looks like once its ``torchx``
imports read ``asynctorchx``: a subclass of our ``Scheduler`` whose methods are plain
``def`` (each needs ``# type: ignore[override]`` under mypy). Its apps live in memory;
the test drives them (:meth:`PortedScheduler.write`, :meth:`PortedScheduler.finish`)
and can hold ``describe`` in its thread (:attr:`PortedScheduler.gate`). It is a real
synchronous library: a lock guards its state and a condition wakes its log followers.

:class:`TorchXShapedScheduler` has TorchX's interface without being one of our
schedulers (as an object of a TorchX scheduler class that was not ported).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import anyio.from_thread

from asynctorchx.schedulers.api import (
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
)
from asynctorchx.specs.api import AppDef, AppDryRunInfo, AppState, CfgVal, is_terminal, runopts


def label_opts() -> runopts:
    opts = runopts()
    opts.add("label", type_=str, help="a label", default="none")
    return opts


class PortedScheduler(Scheduler[AppDef]):
    """Apps in memory; every I/O method is a plain function, as in TorchX."""

    poll_interval = 0.01  # seconds: the adapter's describe polling, kept short for tests
    capabilities = Capabilities(log_streams=frozenset({Stream.COMBINED}))

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__("ported", session_name)
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.states: dict[str, AppState] = {}
        self.lines: dict[str, list[str]] = {}
        self.closes = 0
        self.describe_threads: list[threading.Thread] = []
        self.described = 0
        self.log_steps = 0
        self.log_iterators_closed = 0
        self.followers: list[Iterator[str]] = []
        #: While set to an Event, describe waits for it (in its worker thread).
        self.gate: threading.Event | None = None
        #: Set (on the event loop) when a describe is held by the gate.
        self.held: anyio.Event | None = None
        self.error: Exception | None = None

    def _run_opts(self) -> runopts:  # TorchX's form: an instance method
        return label_opts()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[AppDef]:
        return AppDryRunInfo(app, repr)

    def schedule(self, dryrun_info: AppDryRunInfo[AppDef]) -> str:  # type: ignore[override]
        if self.error is not None:
            raise self.error
        with self.lock:
            app_id = f"{dryrun_info.request.name}-{len(self.states)}"
            self.states[app_id] = AppState.RUNNING
            self.lines[app_id] = []
            return app_id

    def describe(self, app_id: str) -> DescribeAppResponse | None:  # type: ignore[override]
        self.describe_threads.append(threading.current_thread())
        gate, held = self.gate, self.held
        if gate is not None:
            if held is not None:
                anyio.from_thread.run_sync(held.set)
            gate.wait()
        with self.lock:
            self.described += 1
            state = self.states.get(app_id)
        return None if state is None else DescribeAppResponse(app_id=app_id, state=state)

    def list(self) -> list[ListAppResponse]:  # type: ignore[override]
        with self.lock:
            return [ListAppResponse(app_id=a, state=s) for a, s in self.states.items()]

    def _cancel_existing(self, app_id: str) -> None:  # type: ignore[override]
        self.finish(app_id, AppState.CANCELLED)

    def log_iter(  # type: ignore[override]
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterator[str]:
        if app_id not in self.states:
            raise ValueError(f"no app {app_id}")
        follower = self._follow(app_id, should_tail)
        self.followers.append(follower)  # kept: only an explicit close() ends it early
        return follower

    def _follow(self, app_id: str, should_tail: bool) -> Iterator[str]:
        read = 0
        try:
            while True:
                with self.changed:
                    self.log_steps += 1
                    while should_tail and read == len(self.lines[app_id]):
                        if is_terminal(self.states[app_id]):
                            return
                        self.changed.wait()
                    if read == len(self.lines[app_id]):
                        return
                    line = self.lines[app_id][read]
                read += 1
                yield line
        finally:
            self.log_iterators_closed += 1

    def close(self) -> None:  # type: ignore[override]
        self.closes += 1

    # ------------------------------------------------------------------ the test's hands

    def write(self, app_id: str, line: str) -> None:
        """Append a line to the app's log and wake its followers."""
        with self.changed:
            self.lines[app_id].append(line)
            self.changed.notify_all()

    def finish(self, app_id: str, state: AppState = AppState.SUCCEEDED) -> None:
        """Put the app in ``state`` and wake its followers."""
        with self.changed:
            self.states[app_id] = state
            self.changed.notify_all()


def create_ported(session_name: str, **kwargs: Any) -> PortedScheduler:
    """A factory that exposes no capabilities."""
    return PortedScheduler(session_name, **kwargs)


class TorchXShapedScheduler:
    """TorchX's interface (``torchx.schedulers.api.Scheduler``), not one of our classes."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        self.backend = "shaped"
        self.session_name = session_name
        self.validated: list[tuple[AppDef, str]] = []
        self.dryrun_cfgs: list[Mapping[str, CfgVal]] = []
        self.apps: dict[str, AppState] = {}
        self.closes = 0

    def run_opts(self) -> runopts:
        return label_opts()

    def _validate(self, app: AppDef, scheduler: str) -> None:  # TorchX's two arguments
        self.validated.append((app, scheduler))
        if app.name == "invalid":
            raise ValueError("app 'invalid' refused by _validate")

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[AppDef]:
        self.dryrun_cfgs.append(cfg)
        return AppDryRunInfo(app, repr)

    def schedule(self, dryrun_info: AppDryRunInfo[AppDef]) -> str:
        app_id = f"{dryrun_info.request.name}-{len(self.apps)}"
        self.apps[app_id] = AppState.SUCCEEDED
        return app_id

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        state = self.apps.get(app_id)
        return None if state is None else DescribeAppResponse(app_id=app_id, state=state)

    def list(self) -> list[ListAppResponse]:
        return [ListAppResponse(app_id=a, state=s) for a, s in self.apps.items()]

    def cancel(self, app_id: str) -> None:
        if app_id in self.apps:
            self.apps[app_id] = AppState.CANCELLED

    def log_iter(self, app_id: str, *args: Any, **kwargs: Any) -> list[str]:
        return [f"{app_id} says hi\n"]

    def build_workspace_and_update_role(self, role: Any, workspace: str, cfg: Any) -> None:
        role.image = workspace

    def close(self) -> None:
        self.closes += 1


class Made:
    """A factory that keeps what it made (the Runner wraps it in an adapter)."""

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        self.made: list[Any] = []

    def __call__(self, session_name: str, **kwargs: Any) -> Any:
        self.made.append(self.cls(session_name, **kwargs))
        return self.made[-1]

    @property
    def one(self) -> Any:
        (sched,) = self.made
        return sched
