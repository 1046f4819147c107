"""docker-py's view of a ``local_docker`` container request: ``containers.run`` keywords.

TorchX 0.7.0's ``torchx.schedulers.docker_scheduler`` keeps each replica as the keyword
arguments of docker-py's ``client.containers.run(image, command, detach=True, **kwargs)``
(``DockerContainer.kwargs``). asynctorchx keeps the body of the Docker Engine API's
``POST /containers/create`` instead (``DockerContainer.config``), because it talks to the
engine through aiodocker. :func:`run_kwargs` derives the first from the second, so the
two never disagree: the ``config`` is what is sent; the keywords are the same request in
docker-py's words, for code written against TorchX's dry run.

Passed with the container's ``image`` and ``command`` to docker-py's
``containers.run``, they create the same container: docker-py (7.x) turns each keyword
back into the body field it came from (``docker.models.containers``). What docker-py
would add is the engine's own default (``Driver: ""`` of a device request, an empty
``PortBindings`` list, ``Tty: false``, ...).
"""

from __future__ import annotations

import copy
import types
from collections.abc import Mapping
from typing import Any

#: Bytes in a MiB: a size that is a whole number of them is written ``"<n>m"``, as
#: TorchX writes ``Resource.memMB`` (docker-py reads ``"3000m"`` as 3000 MiB).
_MIB = 1024 * 1024

#: ``HostConfig`` fields copied as they are, and their docker-py keyword.
_HOST_FIELDS = {
    "Init": "init",
    "NanoCpus": "nano_cpus",
    "RestartPolicy": "restart_policy",
}

#: ``HostConfig`` sizes in bytes, and their docker-py keyword.
_HOST_SIZES = {"Memory": "mem_limit", "ShmSize": "shm_size"}

#: The fields of docker-py's ``docker.types.DeviceRequest`` and the values it gives the
#: ones not set; the engine reads a missing field the same way.
_DEVICE_REQUEST_DEFAULTS: dict[str, Any] = {
    "Driver": "",
    "Count": 0,
    "DeviceIDs": [],
    "Capabilities": [],
    "Options": {},
}


def _environment(env: list[str]) -> dict[str, str]:
    """``Env``'s ``KEY=VALUE`` items as a dict (a key never holds ``=``: it is refused)."""
    return dict(item.split("=", 1) for item in env)


def _size(size: int) -> int | str:
    """A size in bytes as docker-py takes it: ``"<n>m"`` for whole MiB, else bytes."""
    return f"{size // _MIB}m" if size % _MIB == 0 else size


def _device(entry: Mapping[str, str]) -> str | dict[str, str]:
    """One ``HostConfig.Devices`` entry as docker-py's ``devices`` item.

    ``host:container:permissions``, as TorchX writes it; the entry itself (docker-py
    takes it as is) when a path holds ``:``, which that form cannot carry.
    """
    host, container = entry["PathOnHost"], entry["PathInContainer"]
    if ":" in host or ":" in container:
        return dict(entry)
    return f"{host}:{container}:{entry['CgroupPermissions']}"


def _device_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """One ``HostConfig.DeviceRequests`` entry as docker-py's ``DeviceRequest`` dict."""
    return {**copy.deepcopy(_DEVICE_REQUEST_DEFAULTS), **copy.deepcopy(dict(request))}


def _host_kwargs(host: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords that docker-py turns into ``HostConfig`` fields (not the network)."""
    kwargs: dict[str, Any] = {
        "privileged": bool(host.get("Privileged", False)),
        "mounts": [dict(mount) for mount in host.get("Mounts", [])],
        "devices": [_device(entry) for entry in host.get("Devices", [])],
    }
    for field, keyword in _HOST_FIELDS.items():
        if field in host:
            kwargs[keyword] = copy.deepcopy(host[field])
    for field, keyword in _HOST_SIZES.items():
        if field in host:
            kwargs[keyword] = _size(host[field])
    if "DeviceRequests" in host:
        kwargs["device_requests"] = [_device_request(r) for r in host["DeviceRequests"]]
    return kwargs


def run_kwargs(name: str, config: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return docker-py's ``containers.run`` keywords for the create body ``config``.

    The keywords complete ``containers.run(image, command, detach=True, **kwargs)``, as
    TorchX's ``torchx.schedulers.docker_scheduler`` calls it, where ``command`` is the
    body's ``Entrypoint`` then ``Cmd`` (``DockerContainer.command``):

    - ``name``, ``hostname``, ``environment`` (a dict), ``labels``, ``privileged``
      (always), ``mounts`` (dicts equal to docker-py's ``docker.types.Mount``) and
      ``devices`` (``"host:container:permissions"``) are always there, as in TorchX;
    - ``entrypoint`` is ``[]``: the command runs as given, never after the image's
      ``ENTRYPOINT``, as the body's ``Entrypoint`` makes it (TorchX passes none);
    - ``network`` and ``networking_config`` (the network's aliases, docker-py 7);
    - when the body has them: ``init``, ``mem_limit`` and ``shm_size`` (``"<n>m"``),
      ``nano_cpus``, ``device_requests`` (dicts equal to ``docker.types.DeviceRequest``),
      ``restart_policy``, and ``ports`` (each exposed port with no host binding:
      ``{"6006/tcp": []}`` publishes nothing).

    Args:
        name: the container's name.
        config: the body of ``POST /containers/create`` (Docker Engine API), as
            ``DockerContainer.config`` holds it.

    Returns:
        A read-only mapping, made anew at each call from ``config``: changing a copy of
        it changes nothing that is sent; change ``config`` for that.
    """
    host = config.get("HostConfig", {})
    endpoints = config.get("NetworkingConfig", {}).get("EndpointsConfig", {})
    kwargs: dict[str, Any] = {
        "name": name,
        "hostname": config.get("Hostname", name),
        "entrypoint": [],
        "environment": _environment(config.get("Env", [])),
        "labels": dict(config.get("Labels", {})),
        **_host_kwargs(host),
    }
    if "NetworkMode" in host:
        kwargs["network"] = host["NetworkMode"]
    if endpoints:
        kwargs["networking_config"] = copy.deepcopy(dict(endpoints))
    if config.get("ExposedPorts"):
        kwargs["ports"] = {port: [] for port in config["ExposedPorts"]}
    return types.MappingProxyType(kwargs)
