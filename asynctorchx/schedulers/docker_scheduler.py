"""``local_docker``: run each replica of an app as a Docker container, over aiodocker.

Seed ``003`` (TorchX 0.7.0's ``torchx.schedulers.docker_scheduler``) is the reference;
this module talks to the engine's HTTP API with aiodocker and awaits it instead of
polling. The engine keeps all the state: an app outlives the Python process that
started it, and any process (or TorchX's own ``DockerScheduler``, which reads the same
labels) can describe, tail or cancel it.

Where it differs from TorchX 0.7.0, on purpose:

- ``describe`` of an unknown app is ``None`` (TorchX: SUCCEEDED) and returns the roles
  as submitted (the ``AppDef`` is kept in a container label).
- ``cancel`` stops every container concurrently (grace period ``grace``, seconds) and the
  app ends ``CANCELLED`` (TorchX: FAILED). The cancellation is recorded in the engine as
  a marker volume ``asynctorchx-cancelled-<app_id>``, so every process sees it.
- Images are pulled only when missing locally (TorchX pulls each time).
- ``wait`` awaits the engine's container wait endpoint and is correct with restart
  policies: it returns at the app's terminal state, not at a container's first exit.
- Replicas run under ``docker-init`` by default (``init`` run option), so a plain
  program receives the stop signal and cancel is fast.
- Finished containers are removed only by :meth:`DockerScheduler.delete`.

aiodocker is imported here only, on first use; aiodocker runs on asyncio only, so under
trio every engine call raises :class:`~asynctorchx.errors.SchedulerUnavailableError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import io
import json
import math
import os
import re
import secrets
import string
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import datetime
from typing import Any

import anyio
import attrs

from asynctorchx import __version__
from asynctorchx.errors import (
    SchedulerClosedError,
    SchedulerUnavailableError,
    UnknownAppException,
    WorkspaceBuildError,
)
from asynctorchx.schedulers._docker_workspace import DEFAULT_DOCKERFILE, build_context
from asynctorchx.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    validate_app_id,
)
from asynctorchx.specs.api import (
    MISSING,
    AppDef,
    AppDryRunInfo,
    AppState,
    BindMount,
    CfgVal,
    DeviceMount,
    ReplicaStatus,
    Role,
    RoleStatus,
    VolumeMount,
    is_terminal,
    macros,
    make_app_handle,
    runopts,
)
from asynctorchx.specs.converter import from_json, to_json

#: TorchX's labels, spelled exactly as TorchX 0.7.0 writes them (seed 003), so either
#: implementation can describe, list and tail the other's apps.
LABEL_VERSION = "torchx.pytorch.org/version"
LABEL_APP_ID = "torchx.pytorch.org/app-id"
LABEL_ROLE_NAME = "torchx.pytorch.org/role-name"
LABEL_REPLICA_ID = "torchx.pytorch.org/replica-id"
#: asynctorchx's own label: the submitted ``AppDef`` as JSON (the cattrs converter).
LABEL_APP_DEF = "asynctorchx.pytorch.org/app-def"
#: On the cancel marker volume: when the cancel was asked, ns since the epoch.
LABEL_CANCELLED_AT = "asynctorchx.pytorch.org/cancelled-at-ns"
#: The user-defined bridge network replicas join by default (TorchX's).
NETWORK = "torchx"
#: The env var holding replica 0's hostname (``macros.rank0_env``).
RANK0_ENV = "TORCHX_RANK0_HOST"
#: Default seconds between the stop signal and SIGKILL on cancel.
DEFAULT_GRACE_S = 10.0

_CANCEL_MARKER_PREFIX = "asynctorchx-cancelled-"
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
_EXITED = re.compile(r"Exited \((-?\d+)\)")
_ZERO_TIME = "0001-01-01T00:00:00Z"
_LOG_TS = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ")

# The engine's container states that are not terminal (TorchX's table, seed 003).
_LIVE_STATES: dict[str, AppState] = {
    "created": AppState.SUBMITTED,
    "restarting": AppState.PENDING,
    "running": AppState.RUNNING,
    "paused": AppState.PENDING,
    "removing": AppState.PENDING,
}

# resource.devices names known to map to host device files (as TorchX's devices table).
_DEVICE_FILES: dict[str, str] = {"vpc.amazonaws.com/efa": "/dev/infiniband/uverbs"}


# --------------------------------------------------------------------------- request


def _format_container(container: DockerContainer) -> str:
    body = json.dumps(container.config, indent=2, sort_keys=True)
    return (
        f"- name: {container.name}\n  image: {container.image}\n"
        f"  command: {json.dumps(container.command)}\n  create config: "
        + body.replace("\n", "\n  ")
    )


@attrs.define
class DockerContainer:
    """One replica's container, as ``schedule`` will create it (the dry-run request).

    Args:
        name: the container name and hostname, ``{app_id[-30:]}-{role[:30]}-{k}``.
        image: the image (a name, or an image id after a workspace build).
        command: entrypoint then args, after macro substitution.
        config: the body of the engine's ``POST /containers/create`` (Docker Engine API):
            ``Image``, ``Entrypoint``, ``Cmd``, ``Env``, ``Labels``, ``Hostname``,
            ``HostConfig``, ``NetworkingConfig``.
    """

    name: str
    image: str
    command: list[str]
    config: dict[str, Any]

    def __str__(self) -> str:
        return _format_container(self)


@attrs.define
class DockerJob:
    """The dry-run request of ``local_docker``: an app id and one container per replica.

    Args:
        app_id: the app id (also the ``torchx.pytorch.org/app-id`` label).
        containers: the replicas' containers, role by role, replica by replica.
        network: the name of the user-defined bridge network they join.
    """

    app_id: str
    containers: list[DockerContainer]
    network: str = NETWORK

    def __str__(self) -> str:
        lines = [f"app_id: {self.app_id}", f"network: {self.network}", "containers:"]
        lines.extend(str(container) for container in self.containers)
        return "\n".join(lines)


# --------------------------------------------------------------------------- helpers


def _sanitize(text: str) -> str:
    """Make ``text`` usable in a container name (``[A-Za-z0-9][A-Za-z0-9_.-]*``)."""
    cleaned = _NAME_CHARS.sub("-", text).lstrip("-_.")
    return cleaned or "app"


def make_app_id(app_name: str) -> str:
    """Return a new unique app id ``{name}-{10 random lowercase letters and digits}``."""
    alphabet = string.ascii_lowercase + string.digits
    suffix = secrets.choice(string.ascii_lowercase) + "".join(
        secrets.choice(alphabet) for _ in range(9)
    )
    return f"{_sanitize(app_name)}-{suffix}"


def container_name(app_id: str, role_name: str, replica_id: int) -> str:
    """Return the container name (and hostname) of a replica: ``{app_id[-30:]}-{role[:30]}-{k}``."""
    return f"{_sanitize(app_id[-30:])}-{_sanitize(role_name[:30])}-{replica_id}"


def _parse_ts_ns(text: str | None) -> int | None:
    """Parse an RFC 3339 time with up to 9 fraction digits (the engine's) into ns since epoch."""
    if not text or text.startswith("0001-01-01"):
        return None
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", text)
    if match is None:
        return None
    base, frac, zone = match.groups()
    zone = "+00:00" if zone == "Z" else zone
    seconds = int(datetime.fromisoformat(base + zone).timestamp())
    nanos = int((frac or "0")[:9].ljust(9, "0"))
    return seconds * 1_000_000_000 + nanos


def _engine_time(when: datetime) -> str:
    """Format ``when`` as the engine's ``since``/``until`` (seconds.nanoseconds since epoch).

    A naive ``datetime`` is local time (``datetime.timestamp``'s convention).
    """
    ns = round(when.timestamp() * 1_000_000) * 1000
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def _ns_to_engine(ns: int) -> str:
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def _parse_env_items(items: Iterable[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(
                f"run option env item {item!r} is not KEY=VALUE: write e.g. env=FOO=1;BAR=x"
            )
        env[key] = value
    return env


def _replica_state(
    state: Mapping[str, Any], cancelled_at_ns: int | None
) -> tuple[AppState, int | None]:
    """Map a container's ``State`` (inspect) to a replica state and exit code."""
    status = state.get("Status", "")
    exit_code = state.get("ExitCode")
    finished = status in ("exited", "dead") or (status == "created" and bool(state.get("Error")))
    if not finished:
        return _LIVE_STATES.get(status, AppState.UNKNOWN), None
    finished_ns = _parse_ts_ns(state.get("FinishedAt"))
    if cancelled_at_ns is not None and (finished_ns is None or finished_ns >= cancelled_at_ns):
        return AppState.CANCELLED, exit_code
    if status == "exited" and exit_code == 0:
        return AppState.SUCCEEDED, 0
    return AppState.FAILED, exit_code


def _app_state(states: list[AppState], cancelled: bool) -> AppState:
    """The app's state from its replicas': terminal only once every replica is."""
    if not states:
        return AppState.UNKNOWN
    if not all(is_terminal(state) for state in states):
        for live in (AppState.RUNNING, AppState.PENDING, AppState.SUBMITTED):
            if live in states:
                return live
        return AppState.UNKNOWN
    if all(state == AppState.SUCCEEDED for state in states):
        return AppState.SUCCEEDED
    if cancelled:
        return AppState.CANCELLED
    return AppState.FAILED


# --------------------------------------------------------------------------- scheduler


class DockerScheduler(Scheduler[DockerJob]):
    """The ``local_docker`` scheduler: one Docker container per replica (seed 003).

    Args:
        session_name: the runner session (it appears in app handles).
        grace: default seconds between the stop signal and SIGKILL in :meth:`cancel`.
        docker_host: the engine's URL (e.g. ``unix:///var/run/docker.sock``);
            ``None``: ``DOCKER_HOST`` or the default socket, as aiodocker finds it.

    Run options (:meth:`run_opts`): ``copy_env``, ``env``, ``privileged``, ``image_repo``,
    ``network``, ``init``. The scheduler holds one aiodocker client, opened on first use;
    ``close()`` closes it and leaves the containers running (the engine keeps the app).

    Raises (from every engine call):
        SchedulerUnavailableError: aiodocker is not installed, the event loop is not
            asyncio (trio), or no Docker engine answers.
        SchedulerClosedError: the scheduler was closed.
    """

    def __init__(
        self, session_name: str, grace: float = DEFAULT_GRACE_S, docker_host: str | None = None
    ) -> None:
        super().__init__("local_docker", session_name)
        self.grace = grace
        self.docker_host = docker_host
        self._docker: Any = None
        self._client_lock = anyio.Lock()
        self._closed = False

    # ------------------------------------------------------------------ the client

    async def _client(self) -> Any:
        """Return the aiodocker client, creating it (and checking the engine) on first use."""
        if self._closed:
            raise SchedulerClosedError(
                f"the local_docker scheduler of session {self.session_name!r} is closed:"
                " create a new one"
            )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise SchedulerUnavailableError(
                "local_docker needs an asyncio event loop (aiodocker runs on asyncio only):"
                " run it under asyncio, e.g. anyio.run(main, backend='asyncio')"
            ) from None
        async with self._client_lock:
            if self._docker is not None:
                return self._docker
            try:
                import aiodocker
            except ImportError as err:
                raise SchedulerUnavailableError(
                    f"local_docker needs the aiodocker package ({err}): pip install aiodocker"
                ) from err
            where = self.docker_host or os.environ.get("DOCKER_HOST") or "the default socket"
            try:
                docker = aiodocker.Docker(url=self.docker_host)
            except (aiodocker.DockerError, ValueError, OSError) as err:
                raise SchedulerUnavailableError(
                    f"no Docker engine found at {where} ({err}): start one, e.g."
                    " `bash scripts/docker-engine.sh start`, or set DOCKER_HOST"
                ) from err
            try:
                await docker.version()
            except (aiodocker.DockerError, OSError) as err:
                await docker.close()
                raise SchedulerUnavailableError(
                    f"no Docker engine answers at {where} ({err}): start one, e.g."
                    " `bash scripts/docker-engine.sh start`, or set DOCKER_HOST"
                ) from err
            self._docker = docker
            return docker

    async def close(self) -> None:
        """Close the engine connection; idempotent, never raises. Containers keep running."""
        self._closed = True
        docker, self._docker = self._docker, None
        if docker is not None:
            with contextlib.suppress(Exception):
                await docker.close()

    async def _json(self, path: str, method: str = "GET", **kwargs: Any) -> Any:
        docker = await self._client()
        return await docker._query_json(path, method, **kwargs)

    @staticmethod
    def _is_status(err: BaseException, *statuses: int) -> bool:
        return getattr(err, "status", None) in statuses

    # ------------------------------------------------------------------ options, dry run

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add(
            "copy_env",
            type_=list[str],
            default=None,
            help="glob patterns of environment variables to copy if not set in AppDef. Ex: FOO_*",
        )
        opts.add(
            "env",
            type_=list[str],
            default=None,
            help="KEY=VALUE environment variables for every replica (the role's env wins)."
            " Ex: FOO=1;BAR=x",
        )
        opts.add("privileged", type_=bool, default=False, help="run the containers privileged")
        opts.add(
            "image_repo",
            type_=str,
            default=None,
            help="(workspaces) repository to tag built workspace images with, as"
            " <image_repo>:<id>. Ex: example.com/your/container",
        )
        opts.add(
            "network",
            type_=str,
            default=NETWORK,
            help="user-defined bridge network the replicas join (created when missing)",
        )
        opts.add(
            "init",
            type_=bool,
            default=True,
            help="run docker-init as PID 1 so the entrypoint receives stop signals",
        )
        return opts

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        if not app.roles:
            raise ValueError(f"app {app.name!r} has no roles: add at least one Role")
        names = [role.name for role in app.roles]
        if len(set(names)) != len(names):
            raise ValueError(f"app {app.name!r} has duplicate role names {names}: rename them")
        for role in app.roles:
            if role.num_replicas < 1:
                raise ValueError(
                    f"role {role.name!r} has num_replicas={role.num_replicas}: use 1 or more"
                )
            if not role.image:
                raise ValueError(f"role {role.name!r} has no image: set Role.image")
            if role.entrypoint == MISSING or not role.entrypoint:
                raise ValueError(f"role {role.name!r} has no entrypoint: set Role.entrypoint")

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[DockerJob]:
        default_env: dict[str, str] = {}
        copy_env = cfg.get("copy_env")
        if isinstance(copy_env, list):
            for pattern in copy_env:
                for key in fnmatch.filter(os.environ.keys(), pattern):
                    default_env[key] = os.environ[key]
        cfg_env = cfg.get("env")
        if isinstance(cfg_env, list):
            default_env.update(_parse_env_items(cfg_env))
        network = str(cfg.get("network") or NETWORK)
        use_init = cfg.get("init", True) is not False
        privileged = cfg.get("privileged") is True

        app_id = make_app_id(app.name)
        app_json = to_json(app)
        rank0 = container_name(app_id, app.roles[0].name, 0)
        job = DockerJob(app_id=app_id, containers=[], network=network)
        for role in app.roles:
            for replica_id in range(role.num_replicas):
                values = macros.Values(
                    img_root="", app_id=app_id, replica_id=str(replica_id), rank0_env=RANK0_ENV
                )
                replica = values.apply(role)
                name = container_name(app_id, role.name, replica_id)
                env = {**default_env, **replica.env, RANK0_ENV: rank0}
                job.containers.append(
                    self._container(
                        app_id, replica, replica_id, name, env, app_json, network,
                        use_init, privileged,
                    )
                )  # fmt: skip
        return AppDryRunInfo(job, str)

    def _container(
        self,
        app_id: str,
        role: Role,
        replica_id: int,
        name: str,
        env: dict[str, str],
        app_json: str,
        network: str,
        use_init: bool,
        privileged: bool,
    ) -> DockerContainer:
        host: dict[str, Any] = {"NetworkMode": network, "Init": use_init}
        if privileged:
            host["Privileged"] = True
        resource = role.resource
        if resource.memMB > 0:
            host["Memory"] = int(resource.memMB) * 1024 * 1024
            host["ShmSize"] = int(resource.memMB) * 1024 * 1024
        if resource.cpu > 0:
            host["NanoCpus"] = int(resource.cpu * 1_000_000_000)
        if resource.gpu > 0:
            host["DeviceRequests"] = [{"Count": resource.gpu, "Capabilities": [["compute"]]}]
        devices: list[dict[str, str]] = []
        for device, count in resource.devices.items():
            path = _DEVICE_FILES.get(device, device)
            if not path.startswith("/dev/"):
                raise ValueError(
                    f"role {role.name!r}: resource device {device!r} has no known host device"
                    f" file: use one of {sorted(_DEVICE_FILES)} or a /dev/ path"
                )
            paths = [f"{path}{i}" for i in range(count)] if device in _DEVICE_FILES else [path]
            devices.extend(
                {"PathOnHost": p, "PathInContainer": p, "CgroupPermissions": "rwm"} for p in paths
            )
        mounts: list[dict[str, Any]] = []
        for mount in role.mounts:
            if isinstance(mount, BindMount):
                mounts.append(
                    {
                        "Type": "bind",
                        "Source": os.path.abspath(mount.src_path),
                        "Target": mount.dst_path,
                        "ReadOnly": mount.read_only,
                    }
                )
            elif isinstance(mount, VolumeMount):
                mounts.append(
                    {
                        "Type": "volume",
                        "Source": mount.src,
                        "Target": mount.dst_path,
                        "ReadOnly": mount.read_only,
                    }
                )
            elif isinstance(mount, DeviceMount):
                devices.append(
                    {
                        "PathOnHost": mount.src_path,
                        "PathInContainer": mount.dst_path,
                        "CgroupPermissions": mount.permissions,
                    }
                )
        if mounts:
            host["Mounts"] = mounts
        if devices:
            host["Devices"] = devices
        if role.max_retries > 0:
            host["RestartPolicy"] = {"Name": "on-failure", "MaximumRetryCount": role.max_retries}
        config: dict[str, Any] = {
            "Image": role.image,
            "Entrypoint": [role.entrypoint],
            "Cmd": list(role.args),
            "Env": [f"{key}={value}" for key, value in env.items()],
            "Hostname": name,
            "Labels": {
                LABEL_VERSION: __version__,
                LABEL_APP_ID: app_id,
                LABEL_ROLE_NAME: role.name,
                LABEL_REPLICA_ID: str(replica_id),
                LABEL_APP_DEF: app_json,
            },
            "HostConfig": host,
            "NetworkingConfig": {"EndpointsConfig": {network: {"Aliases": [name]}}},
        }
        if role.port_map:
            ports: dict[str, dict[str, Any]] = {
                f"{port}/tcp": {} for port in role.port_map.values()
            }
            config["ExposedPorts"] = ports
            host["PortBindings"] = {port: [{"HostPort": ""}] for port in ports}
        return DockerContainer(
            name=name, image=role.image, command=[role.entrypoint, *role.args], config=config
        )

    # ------------------------------------------------------------------ submit

    async def schedule(self, dryrun_info: AppDryRunInfo[DockerJob]) -> str:
        """Create and start every container of the request, concurrently; return the app id.

        Pulls an image only when the engine does not have it, makes sure the network
        exists, then creates and starts one container per replica in a task group. If any
        container fails, every container of the app is removed and the first error raised.

        Raises:
            SchedulerUnavailableError: no engine (see the class).
            aiodocker.DockerError: the engine refused a container (the message says why),
                or an image is missing and could not be pulled.
        """
        job = dryrun_info.request
        await self._ensure_images({container.image for container in job.containers})
        network_id = await self._ensure_network(job.network)
        errors: list[Exception] = []

        async def create_and_start(container: DockerContainer) -> None:
            try:
                config = json.loads(json.dumps(container.config))
                config["HostConfig"]["NetworkMode"] = network_id
                endpoint = config["NetworkingConfig"]["EndpointsConfig"].pop(job.network)
                config["NetworkingConfig"]["EndpointsConfig"][network_id] = endpoint
                created = await self._json(
                    "containers/create", "POST", params={"name": container.name}, data=config
                )
                docker = await self._client()
                async with docker._query(f"containers/{created['Id']}/start", "POST"):
                    pass
            except Exception as err:
                errors.append(err)

        async with anyio.create_task_group() as tg:
            for container in job.containers:
                tg.start_soon(create_and_start, container)
        if errors:
            with anyio.CancelScope(shield=True):
                await self.delete(job.app_id)
            raise errors[0]
        return job.app_id

    async def _ensure_images(self, images: set[str]) -> None:
        """Pull each image the engine does not have (TorchX pulls every time)."""
        docker = await self._client()
        import aiodocker

        async def ensure(image: str) -> None:
            try:
                await docker.images.inspect(image)
                return
            except aiodocker.DockerError as err:
                if err.status != 404:
                    raise
            try:
                await docker.images.pull(image)
            except aiodocker.DockerError as err:
                raise aiodocker.DockerError(
                    err.status,
                    f"image {image!r} is not on the engine and pulling it failed"
                    f" ({err.message}): build or load it first (docker build/import/load)"
                    " or fix Role.image",
                ) from err

        async with anyio.create_task_group() as tg:
            for image in sorted(images):
                tg.start_soon(ensure, image)

    async def _ensure_network(self, name: str) -> str:
        """Create the bridge network ``name`` when missing; return its id.

        Safe when several processes create it at once: the engine's duplicate check is
        racy, so after creating, every process lists the networks of that name and keeps
        the oldest (then lowest id); the others are removed. Containers join it by id.
        """
        filters = json.dumps({"name": [name]})
        found = [
            net
            for net in await self._json("networks", params={"filters": filters})
            if net["Name"] == name
        ]
        if not found:
            try:
                await self._json(
                    "networks/create",
                    "POST",
                    data={
                        "Name": name,
                        "Driver": "bridge",
                        "CheckDuplicate": True,
                        "Labels": {LABEL_VERSION: __version__},
                    },
                )
            except Exception as err:
                if not self._is_status(err, 409) and "already exists" not in str(err):
                    raise
            found = [
                net
                for net in await self._json("networks", params={"filters": filters})
                if net["Name"] == name
            ]
        if not found:
            raise RuntimeError(f"network {name!r} vanished right after it was created: retry")
        found.sort(key=lambda net: (net.get("Created", ""), net["Id"]))
        for extra in found[1:]:
            try:
                docker = await self._client()
                async with docker._query(f"networks/{extra['Id']}", "DELETE"):
                    pass
            except Exception as err:
                if not self._is_status(err, 404, 403, 409, 500):
                    raise
        winner: str = found[0]["Id"]
        return winner

    # ------------------------------------------------------------------ workspace

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Build ``workspace`` into an image and set ``role.image`` to it.

        The build context is the directory tarred with its ``.dockerignore`` honoured;
        the Dockerfile is the directory's ``Dockerfile.torchx``, or ``FROM <role.image>``
        + ``COPY . .`` when it has none (TorchX's default). The role's image becomes the
        built image's id, or ``<image_repo>:<id>`` when the ``image_repo`` option is set
        (the image is tagged so, not pushed: push it yourself for remote engines).

        Raises:
            WorkspaceBuildError: the build failed; the message holds the build log.
            NotADirectoryError: ``workspace`` is not a directory.
        """
        docker = await self._client()
        context, _ = await anyio.to_thread.run_sync(build_context, workspace, role.image)
        log: list[str] = []
        image_id: str | None = None
        try:
            stream = docker.images.build(
                fileobj=io.BytesIO(context),
                encoding="identity",
                path_dockerfile=DEFAULT_DOCKERFILE,
                labels={LABEL_VERSION: __version__},
                pull=False,
                stream=True,
            )
            async for item in stream:
                if "stream" in item:
                    log.append(str(item["stream"]))
                if "aux" in item and isinstance(item["aux"], dict) and "ID" in item["aux"]:
                    image_id = str(item["aux"]["ID"])
                if "error" in item or "errorDetail" in item:
                    log.append(str(item.get("error") or item.get("errorDetail")) + "\n")
                    raise WorkspaceBuildError(
                        f"building workspace {workspace!r} failed:\n{''.join(log)}"
                    )
        except WorkspaceBuildError:
            raise
        except Exception as err:
            message = getattr(err, "message", str(err))
            raise WorkspaceBuildError(
                f"building workspace {workspace!r} failed: {message}\n{''.join(log)}"
            ) from err
        if image_id is None:
            raise WorkspaceBuildError(
                f"building workspace {workspace!r} gave no image id; log:\n{''.join(log)}"
            )
        image_repo = cfg.get("image_repo")
        if isinstance(image_repo, str) and image_repo:
            tag = image_id.split(":")[-1][:12]
            async with docker._query(
                f"images/{image_id}/tag", "POST", params={"repo": image_repo, "tag": tag}
            ):
                pass
            role.image = f"{image_repo}:{tag}"
        else:
            role.image = image_id

    # ------------------------------------------------------------------ describe, list

    async def _containers(self, app_id: str) -> list[dict[str, Any]]:
        filters = json.dumps({"label": [f"{LABEL_APP_ID}={app_id}"]})
        listed: list[dict[str, Any]] = await self._json(
            "containers/json", params={"all": "1", "filters": filters}
        )
        return listed

    async def _inspect_all(self, ids: list[str]) -> list[dict[str, Any]]:
        results: dict[str, dict[str, Any]] = {}

        async def inspect(cid: str) -> None:
            try:
                results[cid] = await self._json(f"containers/{cid}/json")
            except Exception as err:
                if not self._is_status(err, 404):  # removed meanwhile
                    raise

        async with anyio.create_task_group() as tg:
            for cid in ids:
                tg.start_soon(inspect, cid)
        return [results[cid] for cid in ids if cid in results]

    async def _cancelled_at(self, app_id: str) -> int | None:
        try:
            volume = await self._json(f"volumes/{_CANCEL_MARKER_PREFIX}{app_id}")
        except Exception as err:
            if self._is_status(err, 404):
                return None
            raise
        labels = volume.get("Labels") or {}
        return int(labels.get(LABEL_CANCELLED_AT, "0"))

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the app from its containers; ``None`` if the engine has none of it.

        The state of each replica comes from its container (``exited`` with 0 is
        SUCCEEDED, another exit code FAILED, stopped by :meth:`cancel` CANCELLED); the app
        is terminal once every container is. ``num_restarts`` is the sum of the
        containers' restart counts; ``roles`` is the submitted ``AppDef``'s (from the
        label), or rebuilt from the containers for apps that TorchX started.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id.
        """
        validate_app_id(app_id)
        listed = await self._containers(app_id)
        if not listed:
            return None
        inspected, cancelled_at = await self._inspect_and_marker(app_id, listed)
        if not inspected:
            return None
        return self._describe_from(app_id, inspected, cancelled_at)

    async def _inspect_and_marker(
        self, app_id: str, listed: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], int | None]:
        marker: list[int | None] = [None]

        async def get_marker() -> None:
            marker[0] = await self._cancelled_at(app_id)

        inspected: list[list[dict[str, Any]]] = [[]]

        async def get_inspected() -> None:
            inspected[0] = await self._inspect_all([c["Id"] for c in listed])

        async with anyio.create_task_group() as tg:
            tg.start_soon(get_marker)
            tg.start_soon(get_inspected)
        return inspected[0], marker[0]

    def _describe_from(
        self, app_id: str, inspected: list[dict[str, Any]], cancelled_at: int | None
    ) -> DescribeAppResponse:
        roles_statuses: dict[str, RoleStatus] = {}
        rebuilt: dict[str, Role] = {}
        states: list[AppState] = []
        restarts = 0
        messages: list[str] = []
        app_def: AppDef | None = None
        for info in sorted(
            inspected,
            key=lambda c: (
                c["Config"]["Labels"].get(LABEL_ROLE_NAME, ""),
                int(c["Config"]["Labels"].get(LABEL_REPLICA_ID, "0")),
            ),
        ):
            labels = info["Config"]["Labels"]
            role = labels.get(LABEL_ROLE_NAME, "")
            replica_id = int(labels.get(LABEL_REPLICA_ID, "0"))
            if app_def is None and LABEL_APP_DEF in labels:
                try:
                    app_def = from_json(labels[LABEL_APP_DEF], AppDef)
                except Exception:
                    app_def = None
            if role not in rebuilt:
                rebuilt[role] = Role(name=role, image=info["Config"]["Image"], num_replicas=0)
                roles_statuses[role] = RoleStatus(role, [])
            rebuilt[role].num_replicas += 1
            state, exit_code = _replica_state(info["State"], cancelled_at)
            restarts += int(info.get("RestartCount", 0))
            name = str(info.get("Name", "")).lstrip("/")
            if state == AppState.FAILED:
                error = info["State"].get("Error") or ""
                messages.append(
                    f"{role}/{replica_id} failed with exit code {exit_code}"
                    + (f": {error}" if error else "")
                )
            roles_statuses[role].replicas.append(
                ReplicaStatus(
                    id=replica_id,
                    state=state,
                    role=role,
                    hostname=str(info["Config"].get("Hostname") or name),
                    exit_code=exit_code,
                )
            )
            states.append(state)
        app_state = _app_state(states, cancelled_at is not None)
        if app_state == AppState.CANCELLED:
            messages.insert(0, "cancelled")
        order = [role.name for role in app_def.roles] if app_def else list(roles_statuses)
        ordered = [roles_statuses[name] for name in order if name in roles_statuses]
        ordered += [status for name, status in roles_statuses.items() if name not in order]
        return DescribeAppResponse(
            app_id=app_id,
            state=app_state,
            num_restarts=restarts,
            msg="; ".join(messages) if messages else "<NONE>",
            roles_statuses=ordered,
            roles=list(app_def.roles) if app_def else list(rebuilt.values()),
        )

    async def list(self) -> list[ListAppResponse]:
        """List every app the engine has containers of (asynctorchx's and TorchX's).

        One entry per app, from one container listing and one volume listing (no
        per-container inspect): the state comes from each container's status text.
        """
        filters = json.dumps({"label": [LABEL_APP_ID]})
        listed = await self._json("containers/json", params={"all": "1", "filters": filters})
        volume_filters = json.dumps({"label": [LABEL_CANCELLED_AT]})
        volumes = await self._json("volumes", params={"filters": volume_filters})
        cancelled = {
            (vol.get("Labels") or {}).get(LABEL_APP_ID) for vol in volumes.get("Volumes") or []
        }
        per_app: dict[str, list[AppState]] = {}
        for container in listed:
            app_id = container["Labels"][LABEL_APP_ID]
            status = container.get("State", "")
            if status in ("exited", "dead"):
                match = _EXITED.search(container.get("Status", ""))
                code = int(match.group(1)) if match else None
                state = AppState.SUCCEEDED if code == 0 else AppState.FAILED
                if app_id in cancelled and code != 0:
                    state = AppState.CANCELLED
            else:
                state = _LIVE_STATES.get(status, AppState.UNKNOWN)
            per_app.setdefault(app_id, []).append(state)
        return [
            ListAppResponse(app_id=app_id, state=_app_state(states, app_id in cancelled))
            for app_id, states in sorted(per_app.items())
        ]

    # ------------------------------------------------------------------ wait

    async def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        """Await the app's terminal state on the engine and return its description.

        Awaits the engine's container wait endpoint for every live container at once
        (``condition=not-running``; ``next-exit`` for one its restart policy is
        restarting), then describes the app again: a container restarted by its restart
        policy is live again, so this returns at the app's terminal state, not at a first
        exit. No polling. ``None`` for an unknown app.

        Args:
            app_id: the app.
            timeout: seconds to wait at most (``None``: no limit).

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """
        validate_app_id(app_id)
        with anyio.fail_after(timeout):
            # An app's containers are fixed at submit: list them once, then re-inspect.
            listed = await self._containers(app_id)
            while True:
                if not listed:
                    return None
                inspected, cancelled_at = await self._inspect_and_marker(app_id, listed)
                if not inspected:
                    return None
                response = self._describe_from(app_id, inspected, cancelled_at)
                if is_terminal(response.state):
                    return response
                async with anyio.create_task_group() as task_group:
                    for info in inspected:
                        if not is_terminal(_replica_state(info["State"], cancelled_at)[0]):
                            restarting = info["State"].get("Status") == "restarting"
                            condition = "next-exit" if restarting else "not-running"
                            task_group.start_soon(self._wait_not_running, info["Id"], condition)
                listed = [{"Id": info["Id"]} for info in inspected]

    async def _wait_not_running(self, container_id: str, condition: str = "not-running") -> None:
        """Return when the container stops (or restarts) or is gone (engine wait endpoint)."""
        docker = await self._client()
        try:
            async with docker._query(
                f"containers/{container_id}/wait",
                "POST",
                params={"condition": condition},
                timeout=None,
            ) as response:
                await response.read()
        except Exception as err:
            if not self._is_status(err, 404, 409):
                raise

    # ------------------------------------------------------------------ cancel, delete

    async def cancel(self, app_id: str, grace: float | None = None) -> None:
        """Stop every container of the app concurrently; the app ends CANCELLED.

        A no-op for an unknown or already finished app. Records the cancellation in the
        engine first (the marker volume), then stops all containers at once: the stop
        signal, then SIGKILL after ``grace`` seconds (default: the scheduler's ``grace``,
        rounded up to whole seconds as the engine takes). Returns when all have stopped.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id.
        """
        validate_app_id(app_id)
        response = await self.describe(app_id)
        if response is None or is_terminal(response.state):
            return
        await self._stop_all(app_id, self.grace if grace is None else grace)

    async def _cancel_existing(self, app_id: str) -> None:
        await self._stop_all(app_id, self.grace)

    async def _stop_all(self, app_id: str, grace: float) -> None:
        await self._json(
            "volumes/create",
            "POST",
            data={
                "Name": f"{_CANCEL_MARKER_PREFIX}{app_id}",
                "Labels": {LABEL_APP_ID: app_id, LABEL_CANCELLED_AT: str(time.time_ns())},
            },
        )
        docker = await self._client()
        seconds = max(0, math.ceil(grace))

        async def stop(cid: str) -> None:
            try:
                async with docker._query(
                    f"containers/{cid}/stop", "POST", params={"t": str(seconds)}, timeout=None
                ):
                    pass
            except Exception as err:
                if not self._is_status(err, 304, 404):
                    raise

        async with anyio.create_task_group() as tg:
            for container in await self._containers(app_id):
                tg.start_soon(stop, container["Id"])

    async def delete(self, app_id: str) -> int:
        """Remove every container of the app (running ones are killed) and its cancel marker.

        Removal is never a side effect of ``describe`` or ``wait``: call this to free them.

        Returns:
            how many containers were removed.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id.
        """
        validate_app_id(app_id)
        docker = await self._client()
        containers = await self._containers(app_id)

        async def remove(path: str, params: dict[str, str]) -> None:
            try:
                async with docker._query(path, "DELETE", params=params):
                    pass
            except Exception as err:
                if not self._is_status(err, 404, 409):
                    raise

        async with anyio.create_task_group() as tg:
            for container in containers:
                tg.start_soon(remove, f"containers/{container['Id']}", {"force": "1", "v": "1"})
        await remove(f"volumes/{_CANCEL_MARKER_PREFIX}{app_id}", {})
        return len(containers)

    # ------------------------------------------------------------------ logs

    async def _find_container(self, app_id: str, role_name: str, k: int) -> dict[str, Any]:
        validate_app_id(app_id)
        containers = await self._containers(app_id)
        if not containers:
            raise UnknownAppException(make_app_handle(self.backend, self.session_name, app_id))
        for container in containers:
            labels = container["Labels"]
            if labels.get(LABEL_ROLE_NAME) == role_name and labels.get(LABEL_REPLICA_ID) == str(k):
                return await self._json(f"containers/{container['Id']}/json")  # type: ignore[no-any-return]
        replicas = sorted(
            f"{c['Labels'].get(LABEL_ROLE_NAME)}/{c['Labels'].get(LABEL_REPLICA_ID)}"
            for c in containers
        )
        raise ValueError(
            f"app {app_id!r} has no replica {role_name}/{k}: its replicas are {replicas}"
        )

    async def log_iter(
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
        """Stream replica ``k`` of ``role_name``'s log from the engine (an async generator).

        Lines are whole and keep their ``\\n`` (frames are reassembled per stream; a last
        line without one is yielded as it is). ``streams``: stdout, stderr or combined
        (default); ``since``/``until`` bound the lines' engine timestamps (a naive
        ``datetime`` is local time); ``regex`` keeps lines where it matches
        (``re.search``). ``should_tail=True`` follows the container, across restarts by
        its restart policy, until it has stopped for good and every line was yielded.

        Raises:
            UnknownAppException: the engine has no container of ``app_id``.
            ValueError: the app has no replica ``role_name``/``k``.
        """
        info = await self._find_container(app_id, role_name, k)
        pattern = re.compile(regex) if regex else None
        stream = streams or Stream.COMBINED
        cid = info["Id"]
        until_ns = int(until.timestamp() * 1_000_000) * 1000 if until else None
        last_ns = int(since.timestamp() * 1_000_000) * 1000 - 1 if since else None
        tty = bool(info["Config"].get("Tty"))
        while True:
            async for ts_ns, line in self._log_lines(cid, stream, last_ns, until, should_tail, tty):
                if ts_ns is not None:
                    if last_ns is not None and ts_ns <= last_ns:
                        continue  # seen before a reopen (the engine's since is inclusive)
                    last_ns = ts_ns
                if pattern is None or pattern.search(line):
                    yield line
            if not should_tail or (until_ns is not None and time.time_ns() >= until_ns):
                return
            if not await self._await_restart(cid):
                return

    async def _await_restart(self, cid: str) -> bool:
        """After a follow ended: True once the container runs again, False if it is done."""
        try:
            info = await self._json(f"containers/{cid}/json")
        except Exception as err:
            if self._is_status(err, 404):
                return False
            raise
        state = info["State"]
        if state.get("Status") == "running":
            return True
        if state.get("Status") != "restarting":
            return False
        # Restarting by its policy: await the engine's next start (or end) of it. Replay
        # events since it finished, so a start that already happened is not missed.
        since_ns = _parse_ts_ns(state.get("FinishedAt")) or time.time_ns()
        filters = json.dumps({"container": [cid], "event": ["start", "destroy", "die"]})
        docker = await self._client()
        async with docker._query(
            "events",
            params={"filters": filters, "since": _ns_to_engine(since_ns - 1)},
            timeout=None,
        ) as response:
            async for raw in response.content:
                if not raw.strip():
                    continue
                event = json.loads(raw)
                action = event.get("Action") or event.get("status")
                if action == "start":
                    return True
                if action == "destroy":
                    return False
                # "die": it stopped again before we saw it start; look afresh
                return await self._await_restart(cid)
        return False

    async def _log_lines(
        self,
        cid: str,
        stream: Stream,
        since_ns: int | None,
        until: datetime | None,
        follow: bool,
        tty: bool,
    ) -> AsyncIterator[tuple[int | None, str]]:
        """Yield ``(timestamp ns, line)`` from one ``GET /containers/{id}/logs`` call."""
        params: dict[str, str] = {
            "stdout": "1" if stream != Stream.STDERR else "0",
            "stderr": "1" if stream != Stream.STDOUT else "0",
            "timestamps": "1",
            "follow": "1" if follow else "0",
        }
        if since_ns is not None:
            params["since"] = _ns_to_engine(max(since_ns, 0))
        if until is not None:
            params["until"] = _engine_time(until)
        docker = await self._client()
        buffers: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}
        stamps: dict[int, int | None] = {1: None, 2: None}
        async with docker._query(f"containers/{cid}/logs", params=params, timeout=None) as resp:
            content = resp.content
            while True:
                if tty:
                    chunk = await content.readline()
                    if not chunk:
                        break
                    kind = 1
                else:
                    try:
                        header = await content.readexactly(8)
                    except asyncio.IncompleteReadError:
                        break
                    kind = header[0] if header[0] in (1, 2) else 1
                    chunk = await content.readexactly(int.from_bytes(header[4:8], "big"))
                match = _LOG_TS.match(chunk)
                if match is not None:
                    if stamps[kind] is None or not buffers[kind]:
                        stamps[kind] = _parse_ts_ns(match.group(1).decode())
                    chunk = chunk[match.end() :]
                buffer = buffers[kind]
                buffer.extend(chunk)
                while True:
                    end = buffer.find(b"\n")
                    if end < 0:
                        break
                    line = bytes(buffer[: end + 1]).decode("utf-8", errors="replace")
                    del buffer[: end + 1]
                    yield stamps[kind], line
                    stamps[kind] = None
        for kind, buffer in buffers.items():
            if buffer:
                yield stamps[kind], bytes(buffer).decode("utf-8", errors="replace")


def create_scheduler(session_name: str, **kwargs: Any) -> DockerScheduler:
    """Create a :class:`DockerScheduler` (the ``local_docker`` factory).

    ``kwargs`` may hold ``grace`` (seconds, default 10) and ``docker_host``; other keys
    (passed by generic callers) are ignored.
    """
    return DockerScheduler(
        session_name,
        grace=float(kwargs.get("grace", DEFAULT_GRACE_S)),
        docker_host=kwargs.get("docker_host"),
    )


__all__ = [
    "LABEL_APP_DEF",
    "LABEL_APP_ID",
    "LABEL_REPLICA_ID",
    "LABEL_ROLE_NAME",
    "LABEL_VERSION",
    "NETWORK",
    "DockerContainer",
    "DockerJob",
    "DockerScheduler",
    "container_name",
    "create_scheduler",
    "make_app_id",
]
