"""The async Scheduler interface (seed ``000``, TorchX's ``torchx.schedulers.api``).

Every method that does I/O is a coroutine; ``log_iter`` is an async generator;
``wait`` is new: an await that returns at the app's first terminal state. Pure
methods (``submit_dryrun``, ``run_opts``, ``_validate``) stay plain functions.
"""

from __future__ import annotations

import abc
import enum
import re
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio
import attrs

from asynctorchx.errors import InvalidAppIdException
from asynctorchx.specs.api import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    Role,
    RoleStatus,
    is_terminal,
    runopts,
)

T = TypeVar("T")


class Stream(str, enum.Enum):
    """Which output stream ``log_iter`` reads (seed 000)."""

    STDOUT = "stdout"
    STDERR = "stderr"
    COMBINED = "combined"


@attrs.define
class DescribeAppResponse:
    """What ``Scheduler.describe`` knows of an app (seed 000).

    Args:
        app_id: the app's id on its scheduler.
        state: its state.
        num_restarts: restarts so far (``-1``: unknown).
        msg: a free-form message.
        structured_error_msg: a JSON error (the earliest replica error file), or ``<NONE>``.
        ui_url: where to look at it (``file://`` log dir for local schedulers).
        roles_statuses: per role, the replicas' statuses.
        roles: the app's roles as submitted (TorchX leaves them empty; we do not).
    """

    app_id: str = "<NOT_SET>"
    state: AppState = AppState.UNSUBMITTED
    num_restarts: int = -1
    msg: str = NONE
    structured_error_msg: str = NONE
    ui_url: str | None = None
    roles_statuses: list[RoleStatus] = attrs.field(factory=list)
    roles: list[Role] = attrs.field(factory=list)


@attrs.define
class ListAppResponse:
    """One app in ``Scheduler.list`` / ``Runner.list`` (seed 000).

    ``app_handle`` is filled in by the runner.
    """

    app_id: str
    state: AppState
    app_handle: str = "<NOT_SET>"


_VALID_APP_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def validate_app_id(app_id: str) -> str:
    """Return ``app_id`` if it is safe to use in a path or a container name.

    Raises:
        InvalidAppIdException: it is empty, holds a path separator or other character
            outside ``[A-Za-z0-9_.-]``, starts with ``.`` or ``-``, or is ``..``.
    """
    if not isinstance(app_id, str) or not _VALID_APP_ID.match(app_id) or ".." in app_id:
        raise InvalidAppIdException(str(app_id))
    return app_id


def filter_regex(regex: str | None, lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """Yield only the lines of ``lines`` in which ``regex`` matches (``re.search``)."""
    if regex is None:
        return lines
    pattern = re.compile(regex)

    async def filtered() -> AsyncIterator[str]:
        async for line in lines:
            if pattern.search(line):
                yield line

    return filtered()


class Scheduler(abc.ABC, Generic[T]):
    """An async scheduler: submits apps, describes, waits for, tails and cancels them.

    Args:
        backend: the scheduler's registered name (``local_cwd``, ``local_docker``).
        session_name: the runner session; it appears in app handles.

    Use it as ``async with scheduler:`` or call ``await scheduler.close()``; closing
    is idempotent and never raises. Subclasses implement ``schedule``,
    ``_submit_dryrun``, ``describe``, ``list``, ``_cancel_existing``, ``log_iter`` and
    should override ``wait`` with an event-driven await.
    """

    def __init__(self, backend: str, session_name: str) -> None:
        self.backend = backend
        self.session_name = session_name

    async def __aenter__(self) -> Scheduler[T]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Free what the scheduler holds; idempotent, never raises.

        Local schedulers terminate the replicas still running (see their docs).
        """

    async def submit(
        self, app: AppDef, cfg: Mapping[str, CfgVal], workspace: str | None = None
    ) -> str:
        """Submit ``app`` and return its app id (mostly for tests; prefer the Runner).

        Raises:
            InvalidRunConfigException: ``cfg`` does not match :meth:`run_opts`.
        """
        resolved = self.run_opts().resolve(cfg)
        if workspace:
            await self.build_workspace_and_update_role(app.roles[0], workspace, resolved)
        dryrun_info = self.submit_dryrun(app, resolved)
        return await self.schedule(dryrun_info)

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Build ``workspace`` into an image and point ``role.image`` at it.

        The default does nothing: the local schedulers run in the directory itself.
        ``local_docker`` builds an image (see its docs).
        """

    @abc.abstractmethod
    async def schedule(self, dryrun_info: AppDryRunInfo[T]) -> str:
        """Submit the request in ``dryrun_info`` and return the app id."""

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[T]:
        """Return the request that :meth:`schedule` would submit, without submitting it.

        Resolves ``cfg`` against :meth:`run_opts`, validates the app, then lets each role's
        ``pre_proc`` modify the request in order.

        Raises:
            InvalidRunConfigException: ``cfg`` does not match :meth:`run_opts`.
            ValueError: the app is not valid for this scheduler.
        """
        resolved = self.run_opts().resolve(cfg)
        self._validate(app, self.backend, resolved)
        dryrun_info = self._submit_dryrun(app, resolved)
        for role in app.roles:
            dryrun_info = role.pre_proc(self.backend, dryrun_info)
        dryrun_info._app = app
        dryrun_info._cfg = resolved
        return dryrun_info

    @abc.abstractmethod
    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[T]:
        """Build the scheduler request for ``app`` with the resolved ``cfg``."""

    def run_opts(self) -> runopts:
        """Return the run options this scheduler accepts (a ``--help`` for ``cfg``)."""
        return self._run_opts()

    def _run_opts(self) -> runopts:
        return runopts()

    @abc.abstractmethod
    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the app, or return ``None`` if this scheduler does not know it."""

    @abc.abstractmethod
    async def list(self) -> list[ListAppResponse]:
        """List the apps this scheduler knows, one entry per app."""

    async def exists(self, app_id: str) -> bool:
        """Return True if the app was submitted and is still known."""
        return await self.describe(app_id) is not None

    async def cancel(self, app_id: str) -> None:
        """Cancel the app; a no-op for an unknown or already finished app (idempotent).

        Does not wait for the app to end: ``await wait(app_id)`` for that.
        """
        if await self.exists(app_id):
            await self._cancel_existing(app_id)

    @abc.abstractmethod
    async def _cancel_existing(self, app_id: str) -> None:
        """Cancel an app known to exist."""

    async def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        """Wait until the app reaches a terminal state and return its description.

        Returns ``None`` for an unknown app. ``timeout`` is in seconds (``None``: no limit).

        This base implementation is the documented fallback for backends that have no
        events: it polls :meth:`describe` with a backoff from 0.05 s up to 2 s. Every
        scheduler in this package overrides it with an event-driven await.

        Raises:
            TimeoutError: ``timeout`` seconds passed before the app ended.
        """
        return await self._poll_describe(
            app_id, lambda response: is_terminal(response.state), timeout
        )

    async def wait_for_state_change(
        self, app_id: str, state: AppState, timeout: float | None = None
    ) -> DescribeAppResponse | None:
        """Wait until the app's state is no longer ``state``; return its description.

        Returns at once if it already differs (or is terminal), ``None`` for an unknown
        app. What ``Runner.watch`` awaits between two states. This base implementation is
        the fallback for backends without events: it polls :meth:`describe` with a backoff
        from 0.05 s up to 2 s; the local schedulers override it with an event.

        Raises:
            TimeoutError: ``timeout`` seconds (``None``: no limit) passed first.
        """
        return await self._poll_describe(
            app_id,
            lambda response: response.state != state or is_terminal(response.state),
            timeout,
        )

    async def _poll_describe(
        self,
        app_id: str,
        done: Callable[[DescribeAppResponse], bool],
        timeout: float | None,
    ) -> DescribeAppResponse | None:
        """Poll :meth:`describe` with a backoff from 0.05 s up to 2 s until ``done`` holds.

        The one fallback loop behind :meth:`wait` and :meth:`wait_for_state_change` for
        backends without events. Returns ``None`` for an unknown app.

        Raises:
            TimeoutError: ``timeout`` seconds (``None``: no limit) passed first.
        """
        interval = 0.05
        with anyio.fail_after(timeout):
            while True:
                response = await self.describe(app_id)
                if response is None or done(response):
                    return response
                await anyio.sleep(interval)  # fallback poll: no events on this backend
                interval = min(interval * 2, 2.0)

    @abc.abstractmethod
    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> AsyncIterator[str]:
        """Iterate over the log lines of replica ``k`` of ``role_name`` (an async generator).

        Lines keep their ``\\n``. ``should_tail=False``: the lines there now, then stop;
        ``True``: follow until the app is terminal and every line has been yielded.
        ``regex`` keeps matching lines; ``since``/``until`` bound the lines' times;
        ``streams`` picks stdout, stderr or combined (default).

        Raises:
            ValueError: the stream is not supported by the scheduler.
        """

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Check the app can run on this scheduler; the default accepts every app."""


#: The type of a scheduler factory: ``factory(session_name, **kwargs) -> Scheduler``.
SchedulerFactory = Any
