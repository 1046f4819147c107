"""The ``local_docker`` scheduler class, composing the engine, request, state and log modules.

TorchX 0.7.0's ``torchx.schedulers.docker_scheduler`` is the reference; this scheduler
talks to the engine's HTTP API with aiodocker and awaits it instead of polling. The
engine keeps all the state: an app outlives the Python process that started it, and any
process (or TorchX's own ``DockerScheduler``, which reads the same labels) can describe,
tail or cancel it.

Where it differs from TorchX 0.7.0, on purpose:

- ``describe`` of an unknown app is ``None`` (TorchX: SUCCEEDED) and returns the roles
  as submitted (the ``AppDef`` is kept in a container label).
- ``cancel`` stops every container concurrently (``stop_timeout`` seconds between the
  stop signal and SIGKILL, the local schedulers' name) and the
  app ends ``CANCELLED`` (TorchX: FAILED). The cancellation is recorded in the engine as
  a marker volume ``asynctorchx-cancelled-<app_id>``, so every process sees it.
- Images are pulled only when missing locally (TorchX pulls each time).
- ``wait`` (and ``wait_for_state_change``) await the engine's events stream, subscribed
  before the first inspect, and are correct with restart policies: after a ``die`` the
  container is inspected, so they return at the app's terminal state, not at a first exit
  the engine will restart.
- ``log_iter(should_tail=True)`` follows a replica across its restarts and ends once it
  stopped for good and every line was yielded.
- The ``torchx`` network is created once even when several schedulers, in one process or
  several, create it at once (Docker 20.10's duplicate-name check is not atomic).
- Replicas run under ``docker-init`` by default (``init`` run option), so a plain
  program receives the stop signal and cancel is fast.
- An app is detached by default, as in TorchX: closing the scheduler (leaving
  ``async with get_runner()``, ``Runner.close()``, SIGTERM/SIGHUP where the runner owns
  them) leaves it running, since the engine keeps it for any process. The
  ``cancel_on_close`` run option ties an app to the scheduler that submitted it
  instead: ``close()`` cancels it, as the local schedulers end their replicas.
- Finished containers and cancel markers are removed only by :meth:`DockerScheduler.delete`
  (``Runner.delete``, ``asynctorchx delete``), which leaves nothing of the app.
- The engine's HTTP errors are :class:`~asynctorchx.errors.DockerEngineError`, never
  aiodocker's own.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio

from asynctorchx.schedulers.api import (
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
)
from asynctorchx.schedulers.docker import _containers
from asynctorchx.schedulers.docker._engine import Engine
from asynctorchx.schedulers.docker._logs import log_blocks
from asynctorchx.schedulers.docker._network import ensure_network
from asynctorchx.schedulers.docker._options import Opts, run_opts
from asynctorchx.schedulers.docker._request import (
    DockerJob,
    build_job,
    validate,
)
from asynctorchx.schedulers.toolkit import (
    LogBlock,
    LogPosition,
    LogQuery,
    gather,
    validate_app_id,
    validate_stop_timeout,
)
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    Role,
    make_app_handle,
)
from asynctorchx.workspace.docker_workspace import build_workspace

logger = logging.getLogger(__name__)

#: Default seconds between the stop signal and SIGKILL on cancel (the local schedulers').
DEFAULT_STOP_TIMEOUT = 10.0
#: Deprecated name of :data:`DEFAULT_STOP_TIMEOUT` (to be removed in the next release).
DEFAULT_GRACE_S = DEFAULT_STOP_TIMEOUT


class DockerScheduler(Scheduler[DockerJob]):
    """The ``local_docker`` scheduler: one Docker container per replica.

    TorchX 0.7.0's ``torchx.schedulers.docker_scheduler.DockerScheduler``, async, with
    the differences listed in :mod:`asynctorchx.schedulers.docker_scheduler`.

    Args:
        session_name: the runner session (it appears in app handles).
        stop_timeout: default seconds between the stop signal and SIGKILL in
            :meth:`cancel` (``None``: :data:`DEFAULT_STOP_TIMEOUT`, 10); the local
            schedulers' name for it.
        docker_host: the engine's URL (e.g. ``unix:///var/run/docker.sock``);
            ``None``: ``DOCKER_HOST`` or the default socket, as aiodocker finds it.
        grace: deprecated name of ``stop_timeout`` (a ``DeprecationWarning``; removed in
            the next release).

    Run options (:meth:`run_opts`, declared by the dataclass ``docker_scheduler.Opts``):
    ``copy_env``, ``env``, ``privileged``, ``image_repo``, ``quiet``, ``network``,
    ``init``, ``cancel_on_close``. The scheduler holds one aiodocker client, opened on
    first use; :meth:`close` closes it. Apps are detached (TorchX's semantics: they outlive the
    process, any process can describe, tail, cancel or delete them) unless submitted
    with ``cancel_on_close=True``: :meth:`close` cancels those.

    Raises (when created):
        TypeError: both ``stop_timeout`` and ``grace`` were passed.
        InvalidRunConfigException: ``stop_timeout`` is NaN, infinite or negative (a
            cancel could not wait for it).

    Raises (from every engine call):
        SchedulerUnavailableError: aiodocker is not installed, the event loop is not
            asyncio (trio), or no Docker engine answers.
        SchedulerClosedError: the scheduler was closed.
        DockerEngineError: the engine refused a request (``status``, ``message``).
    """

    capabilities = Capabilities(
        opts=Opts, run_opts=run_opts, ends_with_runner_opt="cancel_on_close", workspace="image"
    )

    def __init__(
        self,
        session_name: str,
        stop_timeout: float | None = None,
        docker_host: str | None = None,
        *,
        grace: float | None = None,
    ) -> None:
        super().__init__("local_docker", session_name)
        if grace is not None:
            if stop_timeout is not None:
                raise TypeError("DockerScheduler(): pass stop_timeout only (grace is deprecated)")
            message = "DockerScheduler(): grace is deprecated, use stop_timeout (the same seconds)"
            warnings.warn(message, DeprecationWarning, stacklevel=2)
            stop_timeout = grace
        self.stop_timeout = DEFAULT_STOP_TIMEOUT
        if stop_timeout is not None:
            where = "DockerScheduler() stop_timeout"
            self.stop_timeout = validate_stop_timeout(stop_timeout, where, cfg_key=None)
        self.docker_host = docker_host
        self._engine = Engine(docker_host, session_name)
        #: Apps this scheduler submitted with ``cancel_on_close``: :meth:`close` cancels them.
        self._cancel_on_close: set[str] = set()

    @property
    def grace(self) -> float:
        """Deprecated name of :attr:`stop_timeout` (seconds; a ``DeprecationWarning``)."""
        warnings.warn(
            "DockerScheduler.grace is deprecated, use stop_timeout", DeprecationWarning, 2
        )
        return self.stop_timeout

    async def close(self) -> None:
        """Cancel the ``cancel_on_close`` apps, then close the engine connection.

        Each app this scheduler submitted with the ``cancel_on_close`` run option that
        still runs is cancelled, concurrently, as :meth:`cancel` does (stop signal, then
        SIGKILL after :attr:`stop_timeout` seconds; shielded from cancellation, so it
        also runs when the runner's block is being cancelled); it returns once their
        containers stopped. Every other app keeps running (detached, as in TorchX).
        Idempotent; never raises: a cancel that fails is logged.
        """
        apps, self._cancel_on_close = sorted(self._cancel_on_close), set()
        if apps:
            with anyio.CancelScope(shield=True):
                await gather(functools.partial(self._cancel_on_closing, app_id) for app_id in apps)
        await self._engine.close()

    async def _cancel_on_closing(self, app_id: str) -> None:
        """Cancel one ``cancel_on_close`` app for :meth:`close`; log instead of raising."""
        try:
            await self.cancel(app_id)
        except Exception:
            logger.warning("local_docker: could not cancel %s on close", app_id, exc_info=True)

    # ------------------------------------------------------------------ options, dry run

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Check the app can run as containers (see ``_request.validate``).

        Bind mount sources are checked too when the engine runs on this host (a
        ``unix://`` socket): a remote engine's paths cannot be seen from here.

        Raises:
            ValueError: the app cannot run on ``local_docker``; an
                :class:`~asynctorchx.errors.InvalidAppDefException` names the role,
                the value and the fix.
        """
        validate(app, self._engine.key.startswith("unix://") or not self._engine.key)

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[DockerJob]:
        return AppDryRunInfo(build_job(app, cfg), str)

    # ------------------------------------------------------------------ submit

    async def schedule(self, dryrun_info: AppDryRunInfo[DockerJob]) -> str:
        """Create and start every container of the request, concurrently; return the app id.

        Pulls an image only when the engine does not have it, makes sure the network
        exists, then creates and starts one container per replica in a task group. If any
        container fails, or this call is cancelled, every container of the app is removed
        and the first error raised.

        Args:
            dryrun_info: the request of :meth:`submit_dryrun` (a :class:`DockerJob`).

        Returns:
            the app id.

        Raises:
            SchedulerUnavailableError: no engine (see the class).
            DockerEngineError: the engine refused a container (the message says why),
                or an image is missing and could not be pulled.
        """
        job = dryrun_info.request
        await self._engine.ensure_images({container.image for container in job.containers})
        network_id = await ensure_network(self._engine, job.network)
        if job.cancel_on_close:  # before the start: a close meanwhile cancels it too
            self._cancel_on_close.add(job.app_id)
        try:
            await _containers.create_and_start(self._engine, job, network_id)
        except BaseException:
            self._cancel_on_close.discard(job.app_id)
            raise
        return job.app_id

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Build ``workspace`` into an image and set ``role.image`` to it.

        The build context is the directory tarred with its ``.dockerignore`` honoured;
        the Dockerfile is the directory's ``Dockerfile.torchx``, or ``FROM <role.image>``
        + ``COPY . .`` when it has none (TorchX's default). The role's image becomes the
        built image's id, or ``<image_repo>:<id>`` when the ``image_repo`` option is set
        (the image is tagged so, not pushed: push it yourself for remote engines).

        Args:
            role: the role to patch (role 0 of the app); its ``image`` is the default
                Dockerfile's base.
            workspace: the directory to build.
            cfg: the resolved run options (``image_repo`` is read).

        Raises:
            WorkspaceBuildError: the build failed; the message holds the build log.
            NotADirectoryError: ``workspace`` is not a directory.
        """
        await build_workspace(self._engine, role, workspace, cfg)

    # ------------------------------------------------------------------ describe, list

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the app from its containers; ``None`` if the engine has none of it.

        The state of each replica comes from its container (``exited`` with 0 is
        SUCCEEDED, another exit code FAILED, stopped by :meth:`cancel` CANCELLED); the app
        is terminal once every container is. ``num_restarts`` is the sum of the
        containers' restart counts; ``roles`` is the submitted ``AppDef``'s (from the
        label), or rebuilt from the containers for apps that TorchX started.

        Args:
            app_id: the app.

        Returns:
            the description, or ``None`` if the engine has no container of the app.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id.
            SchedulerUnavailableError: no engine (see the class).
        """
        validate_app_id(app_id)
        return await _containers.describe(self._engine, app_id)

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """List every app the engine has containers of (asynctorchx's and TorchX's).

        One entry per app, from one container listing and one volume listing. A
        container listed as finished keeps its listed state; one listed as live is
        inspected, since the engine's listing lags behind an exit that :meth:`wait` and
        :meth:`describe` already see. Every container of a cancelled app is inspected,
        since only a replica's finish time tells whether the cancel ended it. Every entry
        agrees with :meth:`describe`.

        Raises:
            SchedulerUnavailableError: no engine (see the class).
        """
        return await _containers.list_apps(self._engine)

    # ------------------------------------------------------------------ hooks

    async def _wait_until(
        self, app_id: str, done: Callable[[AppState], bool], timeout: float | None
    ) -> DescribeAppResponse | None:
        """Await ``done(state)`` on the engine's events stream (behind ``wait``).

        An await on the engine's events for the app's containers (subscribed before the
        first inspect, so no event is missed); each ``die``, ``stop``, ``start`` or
        ``destroy`` prompts an inspect of that container. A container its restart policy
        restarts is ``restarting`` when its ``die`` arrives (the engine decides before it
        logs the event), so ``wait`` returns at the app's terminal state, not at a first
        exit. No polling; cancelling the awaiting task closes the stream.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id.
            TimeoutError: ``timeout`` seconds passed first.
            SchedulerUnavailableError: no engine, or it closed the events stream.
        """
        validate_app_id(app_id)
        with anyio.fail_after(timeout):
            return await _containers.watch(
                self._engine, app_id, lambda response: done(response.state)
            )

    async def _cancel_existing(self, app_id: str) -> None:
        """Record the cancel in the engine (the marker volume), then stop every container
        at once: the stop signal, then SIGKILL after :attr:`stop_timeout` seconds (rounded
        up to whole seconds, as the engine takes them); returns once all have stopped."""
        await _containers.stop_all(self._engine, app_id, self.stop_timeout)

    async def _remove(self, app_id: str) -> None:
        """Remove every container of the app and its cancel marker volume (``delete``).

        Nothing of the app is left on the engine; the shared ``torchx`` network, which
        holds no state of any app, stays (TorchX never removes it either). Removal is
        never a side effect of ``describe``, ``wait`` or ``cancel``.
        """
        await _containers.delete_app(self._engine, app_id)
        self._cancel_on_close.discard(app_id)

    # ------------------------------------------------------------------ logs

    def _log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        """Stream a replica's log from the engine, a received chunk's lines at a time.

        Lines are whole and keep their ``\\n``, however long (frames are reassembled per
        stream; a last line without one is yielded as it is when its run ends). ``since``
        and ``until`` are the engine's timestamps of the lines (a naive ``datetime`` is
        local time); with ``should_tail`` the container is followed across restarts by
        its restart policy until it stopped for good (or is removed, also by ``docker rm
        -f`` in the middle of the follow: the iteration ends, nothing is raised) and
        every line was yielded, awaiting the engine's events (no polling); ``streams`` defaults to
        combined. A block's position, for stdout or stderr, is the engine's stamp of the
        last line before it and how many lines had that stamp: a resume reads from that
        stamp, not the log's start (a combined read's counts lines and reads again; see
        :func:`~asynctorchx.schedulers.docker._logs.log_blocks`).

        Args:
            app_id: the app.
            query: the replica, filters and follow mode (already validated).
            start: 0, or a block's position given before.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id (when called).
            UnknownAppException: the engine has no container of ``app_id`` (at the first
                block, as the next two).
            ValueError: the app has no role ``query.role_name`` or replica ``query.k``.
        """
        validate_app_id(app_id)
        handle = make_app_handle(self.backend, self.session_name, app_id)
        return log_blocks(self._engine, app_id, handle, query, start)


def create_scheduler(session_name: str, **kwargs: Any) -> DockerScheduler:
    """Create a :class:`DockerScheduler` (the ``local_docker`` factory).

    Args:
        session_name: the runner session.
        **kwargs: ``stop_timeout`` (seconds, default 10), ``docker_host``, and ``grace``
            (the deprecated name of ``stop_timeout``); other keys (passed by generic
            callers) are ignored.

    Raises:
        TypeError: both ``stop_timeout`` and ``grace`` were passed.
        InvalidRunConfigException: ``stop_timeout`` is NaN, infinite or negative.
    """
    stop_timeout = kwargs.get("stop_timeout")
    grace = kwargs.get("grace")
    return DockerScheduler(
        session_name,
        stop_timeout=None if stop_timeout is None else float(stop_timeout),
        docker_host=kwargs.get("docker_host"),
        grace=None if grace is None else float(grace),
    )
