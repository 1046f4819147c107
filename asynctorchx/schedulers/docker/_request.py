"""The dry-run request of ``local_docker``: one container spec per replica, no I/O.

:func:`build_job` turns an ``AppDef`` and its resolved run options into a
:class:`DockerJob`: one :class:`DockerContainer` per replica, each holding the body of
the Docker Engine API's ``POST /containers/create``. The labels, names and the mapping
of ``Resource`` (GPUs as a ``compute,utility`` device request), mounts and retries are
TorchX 0.7.0's (``torchx.schedulers.docker_scheduler``), so either implementation can
describe, list and tail the other's apps. ``Role.port_map`` ports are exposed, never
published on the host (TorchX ignores them).
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import os
import re
import types
from collections.abc import Mapping
from typing import Any

import attrs

from asynctorchx import __version__
from asynctorchx.errors import InvalidAppDefException, UnknownDeviceError
from asynctorchx.schedulers.docker._options import NETWORK
from asynctorchx.schedulers.ids import make_unique
from asynctorchx.schedulers.toolkit import get_device_mounts
from asynctorchx.specs.api import (
    AppDef,
    BindMount,
    CfgVal,
    DeviceMount,
    Role,
    VolumeMount,
    macros,
)
from asynctorchx.specs.converter import to_json
from asynctorchx.workspace.docker_workspace import LABEL_VERSION as LABEL_VERSION

#: TorchX's labels, spelled exactly as TorchX 0.7.0's ``torchx.schedulers.docker_scheduler``
#: writes them, so either implementation can describe, list and tail the other's apps.
LABEL_APP_ID = "torchx.pytorch.org/app-id"
LABEL_ROLE_NAME = "torchx.pytorch.org/role-name"
LABEL_REPLICA_ID = "torchx.pytorch.org/replica-id"
#: asynctorchx's own label: the submitted ``AppDef`` as JSON (the cattrs converter).
LABEL_APP_DEF = "asynctorchx.pytorch.org/app-def"
#: On the cancel marker volume: when the cancel was asked, ns since the epoch.
LABEL_CANCELLED_AT = "asynctorchx.pytorch.org/cancelled-at-ns"
#: The env var holding replica 0's hostname (``macros.rank0_env``).
RANK0_ENV = "TORCHX_RANK0_HOST"
#: Set in every container to the image it runs (torchx-nightly's ``TORCHX_IMAGE``).
IMAGE_ENV = "TORCHX_IMAGE"

#: The longest container name and hostname: a DNS label (RFC 1123); Linux refuses more
#: than 64 characters (``sethostname``).
MAX_HOSTNAME_LENGTH = 63
#: The most characters of the app id, and of the role name, in a container name (TorchX's).
_PART_LENGTH = 30

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]")

#: ``HostConfig`` fields that docker-py's ``containers.run`` takes as a keyword, and
#: that keyword (:attr:`DockerContainer.kwargs`).
_DOCKER_PY_KEYWORDS = {
    "Init": "init",
    "NanoCpus": "nano_cpus",
    "RestartPolicy": "restart_policy",
    "Memory": "mem_limit",
    "ShmSize": "shm_size",
    "NetworkMode": "network",
}
_MIB = 2**20


def _docker_py_device(entry: dict[str, str]) -> str | dict[str, str]:
    """A ``HostConfig.Devices`` entry as docker-py's ``devices`` item: TorchX's
    ``host:container:permissions``, or the entry itself when a path holds ``:``."""
    host, container = entry["PathOnHost"], entry["PathInContainer"]
    if ":" in host or ":" in container:
        return entry
    return f"{host}:{container}:{entry['CgroupPermissions']}"


@attrs.define
class DockerContainer:
    """One replica's container, as ``schedule`` will create it (the dry-run request).

    Args:
        name: the container name and hostname (:func:`container_name`).
        image: the image (a name, or an image id after a workspace build).
        command: entrypoint then args, after macro substitution.
        config: the body of the engine's ``POST /containers/create`` (Docker Engine API):
            ``Image``, ``Entrypoint``, ``Cmd``, ``Env``, ``Labels``, ``Hostname``,
            ``HostConfig``, ``NetworkingConfig``.

    TorchX 0.7.0's ``DockerContainer`` (``torchx.schedulers.docker_scheduler``) holds
    docker-py's ``containers.run`` keywords instead, since it creates containers through
    docker-py; this one holds the Engine API body, since it talks to the engine through
    aiodocker. :attr:`kwargs` gives TorchX's keywords, derived from ``config``.
    """

    name: str
    image: str
    command: list[str]
    config: dict[str, Any]

    @property
    def kwargs(self) -> Mapping[str, Any]:
        """The request as docker-py's ``containers.run(image, command, **kwargs)`` keywords.

        TorchX's ``DockerContainer.kwargs`` (``torchx.schedulers.docker_scheduler``), for
        code written against TorchX's dry run; derived from :attr:`config` (the body that
        is sent) at each access, so the two never disagree. Passed with :attr:`image` and
        :attr:`command` to docker-py 7's ``containers.run(..., detach=True)``, they create
        the same container (docker-py turns each keyword back into the body field it came
        from; what it adds is the engine's own default):

        - ``name``, ``hostname``, ``environment`` (a dict), ``labels``, ``privileged``
          (always), ``mounts`` (dicts equal to docker-py's ``docker.types.Mount``) and
          ``devices`` (``"host:container:permissions"``, or the body's entry when a path
          holds ``:``) are always there, as in TorchX;
        - ``entrypoint`` is ``[]``: the command runs as given, never after the image's
          ``ENTRYPOINT``, as the body's ``Entrypoint`` makes it (TorchX passes none);
        - ``network`` and ``networking_config`` (the network's aliases, docker-py 7);
        - when the body has them: ``init``, ``mem_limit`` and ``shm_size`` (``"<n>m"``
          for whole MiB, as TorchX writes ``Resource.memMB``, else bytes),
          ``nano_cpus``, ``device_requests`` (dicts equal to
          ``docker.types.DeviceRequest``), ``restart_policy``, and ``ports`` (each exposed
          port with no host binding: ``{"6006/tcp": []}`` publishes nothing).

        Returns:
            A read-only mapping of copies: changing it changes nothing that is sent;
            change :attr:`config` for that.
        """
        config = copy.deepcopy(self.config)
        host = config.get("HostConfig", {})
        kwargs: dict[str, Any] = {
            "name": self.name,
            "hostname": config.get("Hostname", self.name),
            "entrypoint": [],
            "environment": dict(item.split("=", 1) for item in config.get("Env", [])),
            "labels": config.get("Labels", {}),
            "privileged": bool(host.get("Privileged", False)),
            "mounts": host.get("Mounts", []),
            "devices": [_docker_py_device(entry) for entry in host.get("Devices", [])],
        }
        for field, keyword in _DOCKER_PY_KEYWORDS.items():
            if field in host:
                kwargs[keyword] = host[field]
        for keyword in ("mem_limit", "shm_size"):
            if keyword in kwargs and kwargs[keyword] % _MIB == 0:
                kwargs[keyword] = f"{kwargs[keyword] // _MIB}m"
        if "DeviceRequests" in host:  # docker-py's DeviceRequest sets every field
            kwargs["device_requests"] = [
                {"Driver": "", "Count": 0, "DeviceIDs": [], "Capabilities": [], "Options": {}}
                | request
                for request in host["DeviceRequests"]
            ]
        if endpoints := config.get("NetworkingConfig", {}).get("EndpointsConfig"):
            kwargs["networking_config"] = endpoints
        if config.get("ExposedPorts"):
            kwargs["ports"] = {port: [] for port in config["ExposedPorts"]}
        return types.MappingProxyType(kwargs)

    def __str__(self) -> str:
        """The container as the dry run prints it; its logs are the engine's log of it."""
        body = json.dumps(self.config, indent=2, sort_keys=True).replace("\n", "\n  ")
        return (
            f"- name: {self.name}\n  image: {self.image}\n"
            f"  command: {json.dumps(self.command)}\n"
            f"  logs: the engine's log of the container (docker logs {self.name})\n"
            f"  create config: {body}"
        )


@attrs.define
class DockerJob:
    """The dry-run request of ``local_docker``: an app id and one container per replica.

    Args:
        app_id: the app id (also the ``torchx.pytorch.org/app-id`` label).
        containers: the replicas' containers, role by role, replica by replica.
        network: the name of the user-defined bridge network they join.
        cancel_on_close: the ``cancel_on_close`` run option: the scheduler that submits
            it cancels it when it closes (else the app is detached, as in TorchX).
    """

    app_id: str
    containers: list[DockerContainer]
    network: str = NETWORK
    cancel_on_close: bool = False

    def __str__(self) -> str:
        lines = [f"app_id: {self.app_id}", f"network: {self.network}"]
        if self.cancel_on_close:
            lines.append("cancel_on_close: true")
        lines.append("containers:")
        lines.extend(str(container) for container in self.containers)
        return "\n".join(lines)


# --------------------------------------------------------------------------- names


def _sanitize(text: str) -> str:
    """Make ``text`` usable in a container name (``[A-Za-z0-9][A-Za-z0-9_.-]*``).

    Docker's own rule for container names; app ids themselves follow the toolkit's one
    policy (:func:`~asynctorchx.schedulers.toolkit.make_app_id`).
    """
    cleaned = _NAME_CHARS.sub("-", text).lstrip("-_.")
    return cleaned or "app"


def _role_part(role_name: str) -> str:
    """The role's part of a container name: the name, or 21 characters and a digest.

    A name longer than 30 characters keeps its first 21 and ends with 8 hex digits of its
    SHA-256, so two roles that share their first 30 characters get distinct names (cut
    to 30, as TorchX cuts them, both would be one name and the engine refuses the second
    container).
    """
    cleaned = _sanitize(role_name)
    if len(cleaned) <= _PART_LENGTH:
        return cleaned
    digest = hashlib.sha256(role_name.encode()).hexdigest()[:8]
    return f"{cleaned[: _PART_LENGTH - 9]}-{digest}"


def container_name(app_id: str, role_name: str, replica_id: int) -> str:
    """Return the container name (and hostname) of a replica: ``{app}-{role}-{k}``.

    As TorchX 0.7.0's ``torchx.schedulers.docker_scheduler`` names it,
    ``{app_id[-30:]}-{role_name[:30]}-{replica_id}``, with two bounds TorchX lacks:

    - at most :data:`MAX_HOSTNAME_LENGTH` (63) characters, a DNS label's limit (RFC
      1123), for any replica id: the app part gives up its first characters to the
      replica id's digits (the app id's random suffix, at its end, stays). Linux refuses
      a hostname over 64 characters (``sethostname``: the container does not start);
    - a role name over 30 characters is cut to 21 and a digest of the whole name, so
      roles sharing their first 30 characters do not share container names.

    Args:
        app_id: the app id.
        role_name: the role's name.
        replica_id: the replica's id within its role (0 or more).
    """
    role = _role_part(role_name)
    replica = str(replica_id)
    app_length = min(_PART_LENGTH, MAX_HOSTNAME_LENGTH - len(role) - len(replica) - 2)
    return f"{_sanitize(app_id[-max(app_length, 1) :])}-{role}-{replica}"


# --------------------------------------------------------------------------- checks


def validate(app: AppDef, local_engine: bool) -> None:
    """Check ``app`` can run as containers, beyond the checks of every backend.

    The toolkit's :func:`~asynctorchx.schedulers.toolkit.validate_app` has already
    refused what no backend can run (no role, duplicate names, no replica or entrypoint,
    an environment no process can carry, negative resources); a container also needs an
    image. On an engine of this host, a bind mount's host path must exist: Docker
    refuses such a container with an error that names neither the role nor the mount;
    checked at dry run, nothing is created on the engine.

    Args:
        app: the app.
        local_engine: the engine runs on this host (its paths are this host's).

    Raises:
        InvalidAppDefException: a role has no image, or binds a host path that does not
            exist (a ``ValueError``; the message names the role, the value and the fix).
    """
    for role in app.roles:
        if not role.image:
            raise InvalidAppDefException(
                f"role {role.name!r} of app {app.name!r} has no image: set Role.image to a"
                " Docker image (e.g. ghcr.io/pytorch/torchx:0.7.0)"
            )
        for mount in role.mounts if local_engine else ():
            if isinstance(mount, BindMount) and not os.path.exists(mount.src_path):
                raise InvalidAppDefException(
                    f"role {role.name!r} binds {mount.src_path!r} (to {mount.dst_path!r}),"
                    " which does not exist on this host: create it or fix the mount's"
                    " source path"
                )


# --------------------------------------------------------------------------- the request


def _default_env(cfg: Mapping[str, CfgVal]) -> dict[str, str]:
    """The environment every replica gets: ``copy_env`` matches, then ``env`` items."""
    default_env: dict[str, str] = {}
    copy_env = cfg.get("copy_env")
    if isinstance(copy_env, list):
        for pattern in copy_env:
            for key in fnmatch.filter(os.environ.keys(), pattern):
                default_env[key] = os.environ[key]
    cfg_env = cfg.get("env")  # a dict once resolved (DockerRunOpts.resolve reads the list form)
    if isinstance(cfg_env, dict):
        default_env.update(cfg_env)
    return default_env


def build_job(app: AppDef, cfg: Mapping[str, CfgVal]) -> DockerJob:
    """Build the request for ``app``: a new app id and one container per replica.

    Each replica's role has its macros applied (``app_id``, ``replica_id``,
    ``rank0_env``); its environment is the ``copy_env``/``env`` run options' under the
    role's own, plus ``TORCHX_RANK0_HOST`` (replica 0 of role 0's hostname) and
    ``TORCHX_IMAGE`` (the container's image).

    Args:
        app: the validated app.
        cfg: the resolved run options (see ``_options.run_opts``).

    Raises:
        ValueError: an ``env`` item is not ``KEY=VALUE``, or a resource device has no
            known host device file (:class:`~asynctorchx.errors.UnknownDeviceError`)
            or a negative count.
    """
    default_env = _default_env(cfg)
    app_id = make_unique(app.name)
    # what every container shares: its HostConfig's start and its labels' app part
    shared_host: dict[str, Any] = {
        "NetworkMode": str(cfg.get("network") or NETWORK),
        "Init": cfg.get("init", True) is not False,
    }
    if cfg.get("privileged") is True:
        shared_host["Privileged"] = True
    labels = {LABEL_VERSION: __version__, LABEL_APP_ID: app_id, LABEL_APP_DEF: to_json(app)}
    rank0 = container_name(app_id, app.roles[0].name, 0)
    job = DockerJob(
        app_id=app_id,
        containers=[],
        network=shared_host["NetworkMode"],
        cancel_on_close=cfg.get("cancel_on_close") is True,
    )
    for role in app.roles:
        for replica_id in range(role.num_replicas):
            values = macros.Values(
                img_root="", app_id=app_id, replica_id=str(replica_id), rank0_env=RANK0_ENV
            )
            replica = values.apply(role)
            name = container_name(app_id, role.name, replica_id)
            env = {**default_env, **replica.env, RANK0_ENV: rank0, IMAGE_ENV: replica.image}
            config: dict[str, Any] = {
                "Image": replica.image,
                "Entrypoint": [replica.entrypoint],
                "Cmd": list(replica.args),
                "Env": [f"{key}={value}" for key, value in env.items()],
                "Hostname": name,
                "Labels": {**labels, LABEL_ROLE_NAME: role.name, LABEL_REPLICA_ID: str(replica_id)},
                "HostConfig": _host_config(replica, shared_host),
                "NetworkingConfig": {"EndpointsConfig": {job.network: {"Aliases": [name]}}},
            }
            if replica.port_map:
                # exposed only, as documentation: replicas reach each other on the network
                # by name; nothing is published on the host (TorchX publishes nothing either)
                config["ExposedPorts"] = {f"{port}/tcp": {} for port in replica.port_map.values()}
            command = [replica.entrypoint, *replica.args]
            job.containers.append(DockerContainer(name, replica.image, command, config))
    return job


def _devices(role: Role) -> list[dict[str, str]]:
    """The host devices of ``role``: its resource devices, then its device mounts.

    ``Resource.devices`` maps to device files by the table every backend shares
    (:func:`~asynctorchx.schedulers.toolkit.get_device_mounts`, TorchX's
    ``torchx.schedulers.devices``): EFA to ``/dev/infiniband/uverbs*``, Neuron to
    ``/dev/neuron*``.

    Raises:
        UnknownDeviceError: a resource device has no known host device file (a
            ``ValueError``; the message names the role).
    """
    try:
        resource_mounts = get_device_mounts(role.resource.devices)
    except UnknownDeviceError as error:
        raise UnknownDeviceError(f"role {role.name!r}: {error}") from None
    mounts = [*resource_mounts, *(m for m in role.mounts if isinstance(m, DeviceMount))]
    return [
        {
            "PathOnHost": m.src_path,
            "PathInContainer": m.dst_path,
            "CgroupPermissions": m.permissions,
        }
        for m in mounts
    ]


def _mounts(role: Role) -> list[dict[str, Any]]:
    """The bind and volume mounts of ``role`` (``HostConfig.Mounts``)."""
    mounts: list[dict[str, Any]] = []
    for mount in role.mounts:
        if isinstance(mount, BindMount):
            kind, source = "bind", os.path.abspath(mount.src_path)
        elif isinstance(mount, VolumeMount):
            kind, source = "volume", mount.src
        else:
            continue
        mounts.append(
            {"Type": kind, "Source": source, "Target": mount.dst_path, "ReadOnly": mount.read_only}
        )
    return mounts


def _host_config(role: Role, shared: dict[str, Any]) -> dict[str, Any]:
    """The ``HostConfig`` of a replica of ``role``: ``shared`` (network, init, privileged),
    resources, devices, mounts, restarts."""
    host = dict(shared)
    resource = role.resource
    if resource.memMB > 0:
        host["Memory"] = host["ShmSize"] = int(resource.memMB) * 1024 * 1024
    if resource.cpu > 0:
        host["NanoCpus"] = int(resource.cpu * 1_000_000_000)
    if resource.gpu > 0:
        # TorchX's request: CUDA (``compute``) and nvidia-smi (``utility``) in the container
        host["DeviceRequests"] = [{"Count": resource.gpu, "Capabilities": [["compute", "utility"]]}]
    if mounts := _mounts(role):
        host["Mounts"] = mounts
    if devices := _devices(role):
        host["Devices"] = devices
    if role.max_retries > 0:
        host["RestartPolicy"] = {"Name": "on-failure", "MaximumRetryCount": role.max_retries}
    return host
