"""The async Scheduler interface: TorchX's ``torchx.schedulers.api`` made awaitable."""

from __future__ import annotations

import abc
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, Literal, Protocol, TypeVar

import anyio
import attrs

from asynctorchx.errors import InvalidAppDefException
from asynctorchx.schedulers._responses import DescribeAppResponse, ListAppResponse, Stream
from asynctorchx.schedulers._structured import StructuredOpts
from asynctorchx.schedulers._workspace import build_workspaces
from asynctorchx.schedulers.toolkit import (
    BatchedPoller,
    LogBlock,
    LogPosition,
    LogQuery,
    gather,
    gather_results,
    lines_of,
    validate_app,
    validate_app_id,
)
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    RetryPolicy,
    Role,
    Workspace,
    is_terminal,
    runopts,
)

T = TypeVar("T")


@attrs.frozen(kw_only=True)
class Capabilities:
    """What a scheduler class supports, read without an instance (:attr:`Scheduler.capabilities`).

    Args:
        opts: the :class:`StructuredOpts` class whose instance ``cfg`` is; ``None``: a ``dict``.
        run_opts: makes the accepted run options; default ``opts.as_runopts``; ``None``: ask one.
        log_streams: the streams ``log_iter`` reads; it raises ``ValueError`` for another.
        retry_policies: policies honoured with ``max_retries > 0``; another is refused at dry run.
        apps_live_in_process: apps end with the submitting process; the CLI's ``run`` then waits.
        ends_with_runner_opt: the bool run option that ends an app when its scheduler closes.
        workspace: ``"image"`` built into the image, ``"directory"`` copied into ``job_dir``,
            ``None`` not built (TorchX's ``torchx.workspace``).
    """

    opts: type[StructuredOpts] | None = None
    run_opts: Callable[[], runopts] | None = attrs.field(
        default=attrs.Factory(
            lambda self: self.opts.as_runopts if self.opts is not None else None,
            takes_self=True,
        )
    )
    log_streams: frozenset[Stream] = frozenset(Stream)
    retry_policies: frozenset[RetryPolicy] = frozenset(
        {RetryPolicy.REPLICA, RetryPolicy.APPLICATION}
    )
    apps_live_in_process: bool = False
    ends_with_runner_opt: str | None = None
    workspace: Literal["image", "directory"] | None = None


class Scheduler(abc.ABC, Generic[T]):
    """An async scheduler (TorchX's ``torchx.schedulers.api.Scheduler``); ``async with`` closes it.

    ``backend`` is its registered name, ``session_name`` the runner session in app handles. A
    backend implements the abstract methods and :attr:`capabilities`, and may override
    ``_wait_until``, ``_describe_many``, ``_remove``, ``describe_native``, ``_batches``
    with ``_schedule_batch`` (submits of several apps in one call), and ``_mark`` with
    ``_find_marked`` (a journaled group's trial on its apps).
    """

    def __init__(self, backend: str, session_name: str) -> None:
        self.backend = backend
        self.session_name = session_name
        self._batched_poller: BatchedPoller[str, DescribeAppResponse] | None = None

    async def __aenter__(self) -> Scheduler[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Free what the scheduler holds (local: end live replicas); idempotent, never raises."""

    async def submit(
        self, app: AppDef, cfg: Mapping[str, CfgVal], workspace: Workspace | str | None = None
    ) -> str:
        """Submit ``app`` (changed in place, as torchx-nightly's) and return its app id.

        ``workspace`` (a directory, its text form or a :class:`Workspace`) becomes role 0's.

        Raises:
            InvalidRunConfigException: ``cfg`` does not match :meth:`run_opts`.
            ValueError: ``workspace`` is given to a scheduler that builds none.
        """
        resolved = self.run_opts().resolve(cfg)
        if workspace:
            if self.capabilities.workspace is None:
                raise ValueError(
                    f"scheduler {self.backend!r} builds no workspace ({str(workspace)!r}"
                    " given): submit without workspace="
                )
            app.roles[0].workspace = (
                Workspace.from_str(workspace) if isinstance(workspace, str) else workspace
            )
            await build_workspaces(self, app, None, resolved)
        return await self.schedule(self.dryrun_resolved(app, resolved))

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Build ``workspace`` and point ``role.image`` at it; the default builds nothing."""

    @abc.abstractmethod
    async def schedule(self, dryrun_info: AppDryRunInfo[T]) -> str:
        """Submit the request in ``dryrun_info`` and return the app id."""

    async def schedule_many(self, dryrun_infos: Sequence[AppDryRunInfo[T]]) -> list[str]:
        """Submit every request, as :meth:`schedule` does one; return the app ids in order.

        A backend may submit several requests in one call (``slurm``: those that differ only
        in the command and env as one job array, ``docs/slurm.md``); each is still an app of
        its own. The calls run concurrently (a backend bounds its own commands).

        Raises:
            Exception: the first error of a submit, as :meth:`schedule` raises it, after the
                apps already submitted were cancelled.
        """
        app_ids: list[str] = [""] * len(dryrun_infos)

        async def submit(indices: list[int]) -> None:
            submitted = await self._schedule_batch([dryrun_infos[index] for index in indices])
            for index, app_id in zip(indices, submitted, strict=True):
                app_ids[index] = app_id

        try:
            await gather(functools.partial(submit, batch) for batch in self._batches(dryrun_infos))
        except BaseException:
            with anyio.CancelScope(shield=True):
                for app_id in filter(None, app_ids):
                    with contextlib.suppress(Exception):
                        await self.cancel(app_id)
            raise
        return app_ids

    def _batches(self, dryrun_infos: Sequence[AppDryRunInfo[T]]) -> list[list[int]]:
        """The indices of the requests each :meth:`_schedule_batch` submits; default: one each."""
        return [[index] for index in range(len(dryrun_infos))]

    async def _schedule_batch(self, dryrun_infos: Sequence[AppDryRunInfo[T]]) -> list[str]:
        """Submit a batch of :meth:`_batches`; the default submits each by :meth:`schedule`."""
        return [await self.schedule(info) for info in dryrun_infos]

    def _mark(self, dryrun_info: AppDryRunInfo[T], mark: str) -> None:
        """Label the app ``dryrun_info`` submits with ``mark`` (a journaled group's trial),
        for :meth:`_find_marked` (asynctorchx's). The default marks nothing: ``local``'s
        apps end with their driver, which a resumed group submits again anyway."""

    async def _find_marked(self, dryrun_info: AppDryRunInfo[T], mark: str) -> list[str]:
        """The ids of the apps :meth:`_mark` marked ``mark``, where ``dryrun_info`` would
        submit (its namespace); the default finds none."""
        return []

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[T]:
        """Return the request :meth:`schedule` would submit, after validating ``app`` and ``cfg``.

        Raises:
            InvalidRunConfigException: ``cfg`` does not match :meth:`run_opts`.
            ValueError: the app is not valid for this scheduler.
        """
        return self.dryrun_resolved(app, self.run_opts().resolve(cfg))

    def dryrun_resolved(self, app: AppDef, resolved: Mapping[str, CfgVal]) -> AppDryRunInfo[T]:
        """:meth:`submit_dryrun` for ``resolved = run_opts().resolve(cfg)``.

        Raises:
            InvalidAppDefException: no role, duplicate roles, no replicas or entrypoint, or
                a retry policy the backend does not honour.
            InvalidNameException: a role name cannot be a path part.
            ValueError: the app is not valid for this scheduler.
        """
        validate_app(app)
        self._check_retry_policies(app)
        opts = self.capabilities.opts
        cfg = opts.from_cfg(resolved) if opts is not None else resolved
        self._validate(app, self.backend, cfg)
        dryrun_info = self._submit_dryrun(app, cfg)
        for role in app.roles:
            dryrun_info = role.pre_proc(self.backend, dryrun_info)
        dryrun_info.app = app
        dryrun_info.cfg = cfg
        return dryrun_info

    def _check_retry_policies(self, app: AppDef) -> None:
        for role in app.roles:
            policy = role.retry_policy
            if role.max_retries > 0 and policy not in self.capabilities.retry_policies:
                supported = ", ".join(sorted(p.name for p in self.capabilities.retry_policies))
                raise InvalidAppDefException(
                    f"role {role.name!r} asks for RetryPolicy.{policy.name}, which {self.backend}"
                    f" does not honour: use one of {supported}"
                )

    @abc.abstractmethod
    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[T]:
        """Build the request for ``app`` with the resolved ``cfg``."""

    def run_opts(self) -> runopts:
        """Return the run options this scheduler accepts (a ``--help`` for ``cfg``)."""
        return self._run_opts()

    def _run_opts(self) -> runopts:
        """TorchX's hook; the default asks :attr:`capabilities`."""
        make = self.capabilities.run_opts
        return make() if make is not None else runopts()

    @abc.abstractmethod
    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the app, or return ``None`` if this scheduler does not know it."""

    @abc.abstractmethod
    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """List the apps this scheduler knows; ``cfg`` may narrow it (Kubernetes ``namespace``)."""

    async def describe_native(self, app_id: str) -> Any | None:
        """The backend's raw description of the app (TorchX after 0.7.0); ``None``: unknown."""
        del app_id
        return None

    async def exists(self, app_id: str) -> bool:
        """Return True if the app was submitted and is still known."""
        return await self.describe(app_id) is not None

    async def cancel(self, app_id: str) -> None:
        """Cancel the app without waiting; a no-op for an unknown or finished app."""
        response = await self.describe(app_id)
        if response is not None and not is_terminal(response.state):
            await self._cancel_existing(app_id)

    async def delete(self, app_id: str) -> None:
        """Cancel the app and remove what is kept of it; idempotent (TorchX after 0.7.0)."""
        await self.cancel(app_id)
        await self._remove(app_id)

    @abc.abstractmethod
    async def _cancel_existing(self, app_id: str) -> None:
        """Stop a known, non-terminal app; return once the backend took the request."""

    async def _remove(self, app_id: str) -> None:
        """Remove what the backend keeps of the app; the default keeps nothing."""

    #: Seconds between two polls of the fallback :meth:`wait`.
    poll_interval: float = 1.0

    capabilities: Capabilities = Capabilities()

    async def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        """The app's terminal description (``None``: unknown); TimeoutError after ``timeout`` s."""
        return await self._wait_until(app_id, lambda now: is_terminal(now.state), timeout)

    async def wait_for_state_change(
        self, app_id: str, state: AppState, timeout: float | None = None
    ) -> DescribeAppResponse | None:
        """Return the app's description once its state is not ``state``; as :meth:`wait` else."""
        return await self._wait_until(
            app_id, lambda now: now.state != state or is_terminal(now.state), timeout
        )

    async def wait_for_change(
        self, app_id: str, state: AppState, pending_reason: str | None, timeout: float | None = None
    ) -> DescribeAppResponse | None:
        """As :meth:`wait_for_state_change`, and once its ``pending_reason`` is not this one
        (asynctorchx's; ``Runner.watch`` and ``Runner.events`` await it). A subclass that
        overrides ``wait_for_state_change`` is awaited through it: state changes only."""
        if type(self).wait_for_state_change is not Scheduler.wait_for_state_change:
            return await self.wait_for_state_change(app_id, state, timeout)

        def done(now: DescribeAppResponse) -> bool:
            changed = now.state != state or now.pending_reason != pending_reason
            return changed or is_terminal(now.state)

        return await self._wait_until(app_id, done, timeout)

    async def _wait_until(
        self, app_id: str, done: Callable[[DescribeAppResponse], bool], timeout: float | None
    ) -> DescribeAppResponse | None:
        """Await ``done(description)``; the default polls :meth:`_describe_many` in one batch."""
        return await self._poller().wait_until(
            app_id, lambda response: response is None or done(response), timeout
        )

    def _poller(self) -> BatchedPoller[str, DescribeAppResponse]:
        if self._batched_poller is None:
            self._batched_poller = BatchedPoller(self._describe_many, interval=self.poll_interval)
        return self._batched_poller

    async def _describe_many(self, app_ids: Collection[str]) -> dict[str, DescribeAppResponse]:
        """Describe the known apps of ``app_ids``; the default describes each."""
        listed = list(app_ids)
        responses = await gather_results(
            functools.partial(self.describe, app_id) for app_id in listed
        )
        return {
            app_id: response
            for app_id, response in zip(listed, responses, strict=True)
            if response is not None
        }

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
        """Iterate over the log lines (with ``\\n``) of replica ``k`` of ``role_name``.

        TorchX's ``Scheduler.log_iter``; ``since`` and ``until`` apply where times are known.

        Raises:
            ValueError: a bad ``k``, ``regex`` or ``streams``, or no such role or replica.
            UnknownAppException: the scheduler does not know the app.
            NotImplementedError: the backend reads no logs.
        """
        query = LogQuery(role_name, k, regex, since, until, should_tail, streams)
        return lines_of(self._log_blocks(app_id, query, 0))

    def log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition = 0
    ) -> AsyncIterator[LogBlock]:
        """The lines of ``query`` in blocks, resumable at their positions; raises as log_iter."""
        return self._log_blocks(app_id, query, start)

    def _log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        """The backend's hook; raise for checks without I/O at the call, not the first block."""
        raise NotImplementedError(
            f"{type(self).__name__} does not support application log iteration"
        )

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Check the app can run here; the default accepts every app."""


class SchedulerFactory(Protocol):
    """Makes a scheduler from ``(session_name, **kwargs)`` (TorchX's ``SchedulerFactory``)."""

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]:
        """Create a scheduler for the runner session ``session_name``."""
        ...


__all__ = [
    "Capabilities",
    "DescribeAppResponse",
    "ListAppResponse",
    "Scheduler",
    "SchedulerFactory",
    "Stream",
    "StructuredOpts",
    "validate_app_id",
]
