"""``local_docker``'s dry-run request, no I/O; labels, names and mappings are TorchX 0.7.0's."""

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

#: TorchX 0.7.0's ``docker_scheduler`` labels, spelled exactly as TorchX writes them.
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

#: The longest container name and hostname: a DNS label (RFC 1123).
MAX_HOSTNAME_LENGTH = 63
#: The most characters of the app id, and of the role name, in a container name (TorchX's).
_PART_LENGTH = 30

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]")

#: ``HostConfig`` field -> docker-py's ``containers.run`` keyword.
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
    """A ``HostConfig.Devices`` entry as docker-py's ``devices`` item."""
    host, container = entry["PathOnHost"], entry["PathInContainer"]
    if ":" in host or ":" in container:
        return entry
    return f"{host}:{container}:{entry['CgroupPermissions']}"


@attrs.define
class DockerContainer:
    """One replica's container as ``schedule`` creates it (TorchX's ``DockerContainer``).

    Args:
        name: the container name and hostname (:func:`container_name`).
        image: the image (a name, or an image id after a workspace build).
        command: entrypoint then args, after macro substitution.
        config: the Docker Engine API's ``POST /containers/create`` body.
    """

    name: str
    image: str
    command: list[str]
    config: dict[str, Any]

    @property
    def kwargs(self) -> Mapping[str, Any]:
        """TorchX's ``kwargs``: docker-py 7's ``containers.run`` keywords, a read-only copy
        derived from :attr:`config`."""
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
    """``local_docker``'s dry-run request: an app id and one container per replica.

    Args:
        app_id: the app id (also the ``torchx.pytorch.org/app-id`` label).
        containers: the replicas' containers, role by role, replica by replica.
        network: the user-defined bridge network they join.
        cancel_on_close: the scheduler that submits it cancels it when it closes.
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


def _sanitize(text: str) -> str:
    """Make ``text`` usable in a container name (``[A-Za-z0-9][A-Za-z0-9_.-]*``)."""
    cleaned = _NAME_CHARS.sub("-", text).lstrip("-_.")
    return cleaned or "app"


def _role_part(role_name: str) -> str:
    """The role's part of a container name: the name, or 21 characters and a digest."""
    cleaned = _sanitize(role_name)
    if len(cleaned) <= _PART_LENGTH:
        return cleaned
    digest = hashlib.sha256(role_name.encode()).hexdigest()[:8]
    return f"{cleaned[: _PART_LENGTH - 9]}-{digest}"


def container_name(app_id: str, role_name: str, replica_id: int) -> str:
    """Return a replica's container name and hostname: ``{app}-{role}-{k}`` (TorchX's).

    At most 63 characters (a DNS label; Linux refuses longer hostnames), and a role name
    over 30 characters ends in a digest so roles sharing a prefix do not share names.

    Args:
        app_id: the app id.
        role_name: the role's name.
        replica_id: the replica's id within its role (0 or more).
    """
    role = _role_part(role_name)
    replica = str(replica_id)
    app_length = min(_PART_LENGTH, MAX_HOSTNAME_LENGTH - len(role) - len(replica) - 2)
    return f"{_sanitize(app_id[-max(app_length, 1) :])}-{role}-{replica}"


def validate(app: AppDef, local_engine: bool) -> None:
    """Check every role has an image and, on a local engine, its bind sources exist."""
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


def _default_env(cfg: Mapping[str, CfgVal]) -> dict[str, str]:
    """The environment every replica gets: ``copy_env`` matches, then ``env`` items."""
    copy_env = cfg.get("copy_env")
    patterns = copy_env if isinstance(copy_env, list) else []
    default_env = {key: os.environ[key] for p in patterns for key in fnmatch.filter(os.environ, p)}
    cfg_env = cfg.get("env")  # a dict once resolved (DockerRunOpts.resolve reads the list form)
    if isinstance(cfg_env, dict):
        default_env.update(cfg_env)
    return default_env


def build_job(app: AppDef, cfg: Mapping[str, CfgVal]) -> DockerJob:
    """Build the request for ``app``: a new app id and one container per replica."""
    default_env = _default_env(cfg)
    app_id = make_unique(app.name)
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
                # exposed, never published: replicas reach each other by name on the network
                config["ExposedPorts"] = {f"{port}/tcp": {} for port in replica.port_map.values()}
            command = [replica.entrypoint, *replica.args]
            job.containers.append(DockerContainer(name, replica.image, command, config))
    return job


def _devices(role: Role) -> list[dict[str, str]]:
    """The host devices of ``role``: its resource devices, then its device mounts."""
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
    """A replica's ``HostConfig``: ``shared``, resources, devices, mounts, restarts."""
    host = dict(shared)
    resource = role.resource
    if resource.memMB > 0:
        host["Memory"] = host["ShmSize"] = int(resource.memMB) * 1024 * 1024
    if resource.cpu > 0:
        host["NanoCpus"] = int(resource.cpu * 1_000_000_000)
    if resource.gpu > 0:
        host["DeviceRequests"] = [{"Count": resource.gpu, "Capabilities": [["compute", "utility"]]}]
    if mounts := _mounts(role):
        host["Mounts"] = mounts
    if devices := _devices(role):
        host["Devices"] = devices
    if role.max_retries > 0:
        host["RestartPolicy"] = {"Name": "on-failure", "MaximumRetryCount": role.max_retries}
    return host
