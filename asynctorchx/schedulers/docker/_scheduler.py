"""``local_docker``: TorchX 0.7.0's ``docker_scheduler``, awaiting the engine's events.

Its differences from TorchX are in ``docs/schedulers/local_docker.md``.
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
    LABEL_APP_ID,
    DockerJob,
    build_job,
    validate,
)
from asynctorchx.schedulers.toolkit import (
    TRIAL_LABEL,
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
    CfgVal,
    Role,
    make_app_handle,
)
from asynctorchx.workspace.docker_workspace import build_workspace

logger = logging.getLogger(__name__)

#: Default seconds between the stop signal and SIGKILL on cancel (the local schedulers').
DEFAULT_STOP_TIMEOUT = 10.0
#: Deprecated name of :data:`DEFAULT_STOP_TIMEOUT`.
DEFAULT_GRACE_S = DEFAULT_STOP_TIMEOUT


class DockerScheduler(Scheduler[DockerJob]):
    """The ``local_docker`` scheduler: one Docker container per replica (TorchX's, async).

    Args:
        session_name: the runner session (it appears in app handles).
        stop_timeout: seconds from the stop signal to SIGKILL (``None``: the default).
        docker_host: the engine's URL; ``None``: ``DOCKER_HOST`` or the default socket.
        grace: deprecated name of ``stop_timeout`` (a ``DeprecationWarning``).

    Raises:
        TypeError: both ``stop_timeout`` and ``grace`` were passed.
        InvalidRunConfigException: ``stop_timeout`` is NaN, infinite or negative.
        SchedulerUnavailableError: (engine calls) no aiodocker, a trio loop, or no engine.
        DockerEngineError: (engine calls) the engine refused a request.
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
        self._cancel_on_close: set[str] = set()

    @property
    def grace(self) -> float:
        """Deprecated name of :attr:`stop_timeout` (seconds; a ``DeprecationWarning``)."""
        warnings.warn(
            "DockerScheduler.grace is deprecated, use stop_timeout", DeprecationWarning, 2
        )
        return self.stop_timeout

    async def close(self) -> None:
        """Cancel this scheduler's live ``cancel_on_close`` apps, then close; never raises."""
        apps, self._cancel_on_close = sorted(self._cancel_on_close), set()
        if apps:
            with anyio.CancelScope(shield=True):
                await gather(functools.partial(self._cancel_on_closing, app_id) for app_id in apps)
        await self._engine.close()

    async def _cancel_on_closing(self, app_id: str) -> None:
        try:
            await self.cancel(app_id)
        except Exception:
            logger.warning("local_docker: could not cancel %s on close", app_id, exc_info=True)

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Bind sources are checked only on a local (``unix://``) engine."""
        validate(app, self._engine.key.startswith("unix://") or not self._engine.key)

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[DockerJob]:
        return AppDryRunInfo(build_job(app, cfg), str)

    def _mark(self, dryrun_info: AppDryRunInfo[DockerJob], mark: str) -> None:
        """Label every container of the app with ``mark`` (:data:`TRIAL_LABEL`)."""
        for container in dryrun_info.request.containers:
            container.config.setdefault("Labels", {})[TRIAL_LABEL] = mark

    async def _find_marked(self, dryrun_info: AppDryRunInfo[DockerJob], mark: str) -> list[str]:
        """The apps with a container labelled ``mark`` (one listing)."""
        marked = await self._engine.containers(f"{TRIAL_LABEL}={mark}")
        return sorted({container.labels[LABEL_APP_ID] for container in marked})

    async def schedule(self, dryrun_info: AppDryRunInfo[DockerJob]) -> str:
        """Pull missing images, ensure the network, start the containers; return the app id."""
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
        """Build ``workspace`` into an image (TorchX's ``Dockerfile.torchx``) for ``role.image``."""
        await build_workspace(self._engine, role, workspace, cfg)

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the app from its containers; ``None`` if the engine has none of it."""
        validate_app_id(app_id)
        return await _containers.describe(self._engine, app_id)

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """List every app the engine has containers of (asynctorchx's and TorchX's)."""
        return await _containers.list_apps(self._engine)

    async def _wait_until(
        self, app_id: str, done: Callable[[DescribeAppResponse], bool], timeout: float | None
    ) -> DescribeAppResponse | None:
        validate_app_id(app_id)
        with anyio.fail_after(timeout):
            return await _containers.watch(self._engine, app_id, done)

    async def _cancel_existing(self, app_id: str) -> None:
        await _containers.stop_all(self._engine, app_id, self.stop_timeout)

    async def _remove(self, app_id: str) -> None:
        """Remove the app's containers and cancel marker; the shared network stays."""
        await _containers.delete_app(self._engine, app_id)
        self._cancel_on_close.discard(app_id)

    def _log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        validate_app_id(app_id)
        handle = make_app_handle(self.backend, self.session_name, app_id)
        return log_blocks(self._engine, app_id, handle, query, start)


def create_scheduler(session_name: str, **kwargs: Any) -> DockerScheduler:
    """The ``local_docker`` factory (``stop_timeout``, ``docker_host``, ``grace``)."""
    stop_timeout = kwargs.get("stop_timeout")
    grace = kwargs.get("grace")
    return DockerScheduler(
        session_name,
        stop_timeout=None if stop_timeout is None else float(stop_timeout),
        docker_host=kwargs.get("docker_host"),
        grace=None if grace is None else float(grace),
    )
