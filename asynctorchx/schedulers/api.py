"""The async Scheduler interface, TorchX's ``torchx.schedulers.api`` made awaitable.

Every method that does I/O is a coroutine and ``log_iter`` an async generator; ``wait``
is new. What every backend shares is in :mod:`asynctorchx.schedulers.toolkit`.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from datetime import datetime
from typing import Any, Generic, Literal, Protocol, TypeVar

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
    """What a scheduler class supports, read without creating a scheduler.

    A backend declares one as its class attribute :attr:`Scheduler.capabilities`; a
    factory exposes it (:func:`asynctorchx.schedulers.get_scheduler_capabilities`), and
    the Runner (``Runner.scheduler_capabilities``, ``Runner.scheduler_run_opts``) and the
    CLI read it, never the scheduler's name. ``SyncSchedulerAdapter`` makes one from the
    attributes of the TorchX scheduler it wraps.

    Args:
        opts: the :class:`StructuredOpts` class of the scheduler's run options: the
            ``cfg`` a backend's ``_submit_dryrun`` is given, and ``AppDryRunInfo.cfg``,
            is an instance of it (torchx-nightly's ``Scheduler[Opts]``); ``None``: a
            plain ``dict``.
        run_opts: makes the run options the scheduler accepts (a new
            :class:`~asynctorchx.specs.api.runopts` per call); by default
            ``opts.as_runopts``, so the two cannot disagree. ``None`` (and no ``opts``):
            only a scheduler knows them (TorchX's ``_run_opts(self)``), so one is created
            to ask.
        log_streams: the streams ``log_iter`` reads (its ``streams`` argument); it raises
            ``ValueError`` for another. A Docker engine and the local schedulers keep
            stdout, stderr and both combined; Slurm writes stdout and stderr to two
            files; the kubelet keeps one combined log per container. ``Runner.events``
            reads stdout and stderr apart when both are here, else the combined log.
        retry_policies: the policies honoured for a role with ``max_retries > 0``; a
            role asking for another is refused at dry run instead of silently not
            restarting. ``RetryPolicy.ROLE`` (TorchX after 0.7.0) is honoured by no
            built-in backend yet.
        apps_live_in_process: the apps end with the process that submitted them (the
            local schedulers: replicas are its child processes). The CLI's ``run`` then
            follows the logs and waits by default; ``False`` (a Docker engine, a
            cluster): it prints the handle and returns unless asked to wait.
        ends_with_runner_opt: the bool run option that, set, ends an app when the
            scheduler that submitted it closes (``local_docker``'s ``cancel_on_close``);
            the CLI's ``run`` then follows it as an app of the process.
        workspace: what a workspace becomes (TorchX's ``torchx.workspace``):
            ``"image"``, built into the role's image (``local_docker``); ``"directory"``,
            copied into the ``job_dir`` the role runs in (``DirWorkspaceMixin``,
            ``slurm``); ``None``, nothing is built (the local schedulers run in the
            directory itself). The CLI's ``run`` builds the current directory by default
            when it is not ``None``, as ``torchx.cli.cmd_run`` does.
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
    """An async scheduler: submits apps, describes, waits for, tails and cancels them.

    Args:
        backend: the scheduler's registered name (``local_cwd``, ``local_docker``).
        session_name: the runner session; it appears in app handles.

    Use it as ``async with scheduler:`` or call ``await scheduler.close()``; closing
    is idempotent and never raises. The public methods are written here once; a
    backend implements ``schedule``, ``_submit_dryrun``, ``describe``, ``list``,
    ``_cancel_existing`` and ``_log_blocks``, declares its :attr:`capabilities`, and where
    it has more to offer the hooks ``_wait_until`` (events instead of polling),
    ``_describe_many``, ``_remove`` and ``describe_native`` (see ``docs/architecture.md``,
    "Adding a backend").
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
        """Free what the scheduler holds; idempotent, never raises.

        Local schedulers terminate the replicas still running (see their docs).
        """

    async def submit(
        self, app: AppDef, cfg: Mapping[str, CfgVal], workspace: Workspace | str | None = None
    ) -> str:
        """Submit ``app`` and return its app id (mostly for tests; prefer the Runner).

        As torchx-nightly's ``Scheduler.submit``, ``app`` itself is changed (the Runner
        works on a copy): ``workspace`` becomes role 0's ``workspace``, then every role's
        workspace is built into its image (roles with the same image and workspace share
        one build, as in the Runner). Without ``workspace`` nothing is built.

        Args:
            app: the app to submit.
            cfg: the run options.
            workspace: a directory, text :meth:`Workspace.from_str` reads, or a
                :class:`Workspace`; ``None`` or ``""``: none.

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
        """Build ``workspace`` into an image and point ``role.image`` at it.

        The default does nothing: the local schedulers run in the directory itself.
        ``local_docker`` builds an image (see its docs).
        """

    @abc.abstractmethod
    async def schedule(self, dryrun_info: AppDryRunInfo[T]) -> str:
        """Submit the request in ``dryrun_info`` and return the app id."""

    def submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[T]:
        """Return the request that :meth:`schedule` would submit, without submitting it.

        Resolves ``cfg`` against :meth:`run_opts`, checks the app with the toolkit's
        :func:`~asynctorchx.schedulers.toolkit.validate_app` (every backend) and the
        backend's :meth:`_validate`, then lets each role's ``pre_proc`` modify the request
        in order.

        Raises:
            InvalidRunConfigException: ``cfg`` does not match :meth:`run_opts`.
            ValueError: the app is not valid for this scheduler.
        """
        return self.dryrun_resolved(app, self.run_opts().resolve(cfg))

    def dryrun_resolved(self, app: AppDef, resolved: Mapping[str, CfgVal]) -> AppDryRunInfo[T]:
        """Do what :meth:`submit_dryrun` does, for run options already resolved.

        For callers that needed the resolved options first (a workspace build), so
        ``runopts.resolve`` runs once per submission.

        Args:
            app: the app to make a request for.
            resolved: ``run_opts().resolve(cfg)``: every option, defaults filled in;
                made a :attr:`Capabilities.opts` instance when the backend has one.

        Raises:
            InvalidAppDefException: the app has no role, duplicate role names, a role
                without replicas or entrypoint.
            InvalidNameException: a role name cannot be used as a path part.
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
        """Refuse a role whose retry policy this backend does not honour.

        Raises:
            InvalidAppDefException: a role with ``max_retries > 0`` asks for a policy
                outside ``capabilities.retry_policies``; the message names the role, the
                policy and the ones this backend supports.
        """
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
        """Build the scheduler request for ``app`` with the resolved ``cfg``."""

    def run_opts(self) -> runopts:
        """Return the run options this scheduler accepts (a ``--help`` for ``cfg``)."""
        return self._run_opts()

    def _run_opts(self) -> runopts:
        """The run options :attr:`capabilities` makes, else none (TorchX's hook: a
        scheduler ported from TorchX overrides it)."""
        make = self.capabilities.run_opts
        return make() if make is not None else runopts()

    @abc.abstractmethod
    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the app, or return ``None`` if this scheduler does not know it."""

    @abc.abstractmethod
    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """List the apps this scheduler knows, one entry per app.

        Args:
            cfg: run options, unresolved, that narrow what is listed where the backend
                has such an option (TorchX's ``list(cfg)`` after 0.7.0: the Kubernetes
                ``namespace``); the others list every app they know. A third-party
                backend written against TorchX 0.7.0 may omit the parameter (see
                the adapter in ``SyncSchedulerAdapter``).
        """

    async def describe_native(self, app_id: str) -> Any | None:
        """Return the backend's own description of the app, as the backend gives it.

        For callers that need what :class:`DescribeAppResponse` does not carry (added to
        TorchX's ``torchx.schedulers.api.Scheduler`` after 0.7.0). A backend that has a
        raw description overrides this and documents its type (for example a Docker
        engine's container ``inspect`` documents, a Volcano job object, Slurm's job
        JSON). This default returns ``None``: the scheduler has no raw description beyond
        :meth:`describe`. ``None`` is also the answer for an unknown app.

        Args:
            app_id: the app's id on this scheduler.
        """
        del app_id  # no raw description in the default
        return None

    async def exists(self, app_id: str) -> bool:
        """Return True if the app was submitted and is still known."""
        return await self.describe(app_id) is not None

    async def cancel(self, app_id: str) -> None:
        """Cancel the app; a no-op for an unknown or already finished app (idempotent).

        Describes the app and, when it is known and not terminal, calls the backend's
        :meth:`_cancel_existing` (TorchX's ``torchx.schedulers.api.Scheduler.cancel``).
        Does not wait for the app to end: ``await wait(app_id)`` for that.

        Args:
            app_id: the app's id on this scheduler.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id (backends that check it).
        """
        response = await self.describe(app_id)
        if response is not None and not is_terminal(response.state):
            await self._cancel_existing(app_id)

    async def delete(self, app_id: str) -> None:
        """Delete the app: cancel it if it still runs, then remove what is kept of it.

        TorchX's ``torchx.schedulers.api.Scheduler.delete`` (added after TorchX 0.7.0):
        idempotent, a no-op for an unknown or already deleted app. Cancels as
        :meth:`cancel` does, then calls the backend's :meth:`_remove` (even for an app
        :meth:`describe` no longer knows, so that what is left of it goes too); after it
        :meth:`describe` returns ``None`` on a backend that keeps something of an app.

        Args:
            app_id: the app's id on this scheduler.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id (backends that check it).
        """
        await self.cancel(app_id)
        await self._remove(app_id)

    @abc.abstractmethod
    async def _cancel_existing(self, app_id: str) -> None:
        """Stop an app that :meth:`describe` knows and says is not terminal.

        Returns once the backend took the request; the app's end is what :meth:`wait`
        awaits.
        """

    async def _remove(self, app_id: str) -> None:
        """Remove what the backend keeps of an app :meth:`delete` cancelled (if it ran):
        records, containers, volumes, jobs. The default keeps nothing, so removes nothing."""

    #: Seconds between two polls of the fallback :meth:`wait` (backends without events).
    poll_interval: float = 1.0

    #: What this scheduler class supports (see :class:`Capabilities`); a backend
    #: declares its own.
    capabilities: Capabilities = Capabilities()

    async def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        """Wait until the app reaches a terminal state and return its description.

        Returns ``None`` for an unknown app. Awaits the backend's :meth:`_wait_until`: an
        event where the backend has events (process exits, Docker's events stream, a
        Kubernetes watch), else the batched poll of :meth:`describe`. Cancelling the
        awaiting task stops only the wait.

        Args:
            app_id: the app's id on this scheduler.
            timeout: seconds to wait at most; ``None``: no limit.

        Raises:
            TimeoutError: ``timeout`` seconds passed before the app ended.
            InvalidAppIdException: ``app_id`` is not a valid id (backends that check it).
        """
        return await self._wait_until(app_id, is_terminal, timeout)

    async def wait_for_state_change(
        self, app_id: str, state: AppState, timeout: float | None = None
    ) -> DescribeAppResponse | None:
        """Wait until the app's state is no longer ``state``; return its description.

        Returns at once if it already differs (or is terminal), ``None`` for an unknown
        app. What ``Runner.watch`` awaits between two states; awaited as :meth:`wait` is.

        Args:
            app_id: the app's id on this scheduler.
            state: the state the caller last saw.
            timeout: seconds to wait at most; ``None``: no limit.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
            InvalidAppIdException: ``app_id`` is not a valid id (backends that check it).
        """
        return await self._wait_until(app_id, lambda now: now != state or is_terminal(now), timeout)

    async def _wait_until(
        self, app_id: str, done: Callable[[AppState], bool], timeout: float | None
    ) -> DescribeAppResponse | None:
        """Await the app until ``done(its state)`` holds; return its description then.

        The hook behind :meth:`wait` and :meth:`wait_for_state_change`. This default is
        the fallback for backends without events: every waiter of this scheduler shares
        one :class:`~asynctorchx.schedulers.toolkit.BatchedPoller` of
        :meth:`_describe_many` each :attr:`poll_interval` seconds, backing off while
        nothing changes. A backend with events overrides it.

        Args:
            app_id: the app's id on this scheduler.
            done: the condition on the app's state.
            timeout: seconds to wait at most; ``None``: no limit.

        Returns:
            the first description whose state ``done`` accepts; ``None`` once the app is
            unknown.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """
        return await self._poller().wait_until(
            app_id, lambda response: response is None or done(response.state), timeout
        )

    def _poller(self) -> BatchedPoller[str, DescribeAppResponse]:
        """The one poller of this scheduler instance, shared by every fallback waiter."""
        if self._batched_poller is None:
            self._batched_poller = BatchedPoller(self._describe_many, interval=self.poll_interval)
        return self._batched_poller

    async def _describe_many(self, app_ids: Collection[str]) -> dict[str, DescribeAppResponse]:
        """Describe several apps at once; leave out the ones this scheduler does not know.

        The polling fallback calls it once per tick with every watched app. This default
        runs :meth:`describe` for each app concurrently; a backend that can ask for many
        apps in one request (one ``squeue`` for many Slurm jobs) overrides it.

        Args:
            app_ids: the apps to describe.
        """
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
        """Iterate over the log lines of replica ``k`` of ``role_name`` (an async iterator).

        TorchX's signature (``torchx.schedulers.api.Scheduler.log_iter``); the arguments
        become one :class:`~asynctorchx.schedulers.toolkit.LogQuery`, and the lines are
        those of the backend's :meth:`_log_blocks` from the log's start. Lines keep their
        ``\\n``.

        Args:
            app_id: the app's id on this scheduler.
            role_name: the role whose replica is read.
            k: the replica id (0-based).
            regex: keep only lines in which it matches (``re.search``).
            since: skip lines written before this time (where the backend knows times).
            until: stop at the first line written after this time (likewise).
            should_tail: ``False``: the lines there now, then stop; ``True``: follow
                until the app is terminal and every line has been yielded.
            streams: stdout, stderr or combined; ``None``: the backend's default.

        Raises:
            ValueError: ``k``, ``regex`` or ``streams`` is not valid, the app has no such
                role or replica, or the backend cannot read that stream.
            UnknownAppException: the scheduler does not know the app.
            NotImplementedError: the backend reads no logs.
        """
        query = LogQuery(role_name, k, regex, since, until, should_tail, streams)
        return lines_of(self._log_blocks(app_id, query, 0))

    def log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition = 0
    ) -> AsyncIterator[LogBlock]:
        """The log lines ``query`` asks for, a block at a time, each with a position.

        A block is ``(position, lines)``: the lines (with their ``\\n``) and where the
        first of them is, as a position this backend reads again from with ``start``: the
        same lines come again from there. ``Runner.events`` resumes a log from a block's
        position and the number of its lines already delivered, and ``Runner.log_lines``
        yields the lines; neither adds a step per line.

        Args:
            app_id: the app's id on this scheduler.
            query: the replica, filters and follow mode (see :meth:`log_iter`).
            start: a position given before (0: the log's start).

        Raises:
            ValueError, UnknownAppException: as :meth:`log_iter`.
        """
        return self._log_blocks(app_id, query, start)

    def _log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        """Read the log ``query`` asks for from the position ``start`` (the backend's hook).

        The hook behind :meth:`log_iter` and :meth:`log_blocks`: an async iterator of
        blocks whose positions this backend reads again from (the local schedulers and
        Slurm: a byte offset in the log file; Docker and Kubernetes: the engine's stamp
        and a count). Checks that need no I/O should raise when it is called, not at the
        first block.

        Args:
            app_id: the app's id on this scheduler.
            query: the replica, filters and follow mode, already validated.
            start: 0, or a block's position given before.

        Raises:
            NotImplementedError: this default, for a backend that reads no logs (as
                TorchX's ``Scheduler.log_iter`` does).
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not support application log iteration"
        )

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Check the app can run on this scheduler; the default accepts every app."""


class SchedulerFactory(Protocol):
    """What the registry maps a scheduler name to (TorchX's ``SchedulerFactory``).

    ``factory(session_name, **kwargs)`` returns a new scheduler; ``kwargs`` are the
    scheduler's constructor arguments (``cache_size``, ``log_dir``...) it accepts.
    """

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
