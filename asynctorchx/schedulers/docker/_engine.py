"""``local_docker``'s Docker Engine API requests and the records read from its JSON."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractContextManager as ContextManager
from typing import Any

import anyio
import attrs

from asynctorchx.schedulers.docker._errors import DockerEngineError, DockerEngineUnreachableError
from asynctorchx.schedulers.toolkit import answered, gather, parse_rfc3339_ns
from asynctorchx.workspace.docker_workspace import DockerEngine

#: Replay events from this long (ns) before subscribing: the engine answers before it
#: subscribes and its clock may be off; a replayed event only prompts another inspect.
EVENTS_SKEW_NS = 1_000_000_000

logger = logging.getLogger(__name__)

_EXITED = re.compile(r"Exited \((-?\d+)\)")


def ns_to_engine(ns: int) -> str:
    """Format ns since the epoch as the engine's ``since``/``until`` (``s.nnnnnnnnn``)."""
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


@attrs.frozen
class Container:
    """A container as the engine reports it: what ``local_docker`` reads of it."""

    id: str
    hostname: str
    image: str
    labels: Mapping[str, str]
    status: str
    exit_code: int | None = None
    error: str = ""
    finished_ns: int | None = None
    restart_count: int = 0
    tty: bool = False
    started_ns: int | None = None
    restart_policy: str | None = None
    oom_killed: bool = False
    created_ns: int | None = None

    @classmethod
    def from_inspect(cls, info: Mapping[str, Any]) -> Container:
        """Read a container's inspect (``GET /containers/{id}/json``)."""
        config, state = info["Config"], info["State"]
        name = str(info.get("Name", "")).lstrip("/")
        return cls(
            id=str(info["Id"]),
            hostname=str(config.get("Hostname") or name),
            image=str(config.get("Image", "")),
            labels=dict(config.get("Labels") or {}),
            status=str(state.get("Status", "")),
            exit_code=state.get("ExitCode"),
            error=str(state.get("Error") or ""),
            finished_ns=parse_rfc3339_ns(state.get("FinishedAt")),
            restart_count=int(info.get("RestartCount", 0)),
            tty=bool(config.get("Tty")),
            started_ns=parse_rfc3339_ns(state.get("StartedAt")),
            restart_policy=str(
                ((info.get("HostConfig") or {}).get("RestartPolicy") or {}).get("Name") or ""
            ),
            oom_killed=bool(state.get("OOMKilled")),
            created_ns=parse_rfc3339_ns(info.get("Created")),
        )

    @classmethod
    def from_listing(cls, entry: Mapping[str, Any]) -> Container:
        """Read one entry of a container listing (``GET /containers/json``)."""
        names = entry.get("Names") or [""]
        match = _EXITED.search(str(entry.get("Status", "")))
        return cls(
            id=str(entry["Id"]),
            hostname=str(names[0]).lstrip("/"),
            image=str(entry.get("Image", "")),
            labels=dict(entry.get("Labels") or {}),
            status=str(entry.get("State", "")),
            exit_code=int(match.group(1)) if match else None,
            created_ns=int(entry["Created"]) * 1_000_000_000 if "Created" in entry else None,
        )


@attrs.frozen
class Event:
    """One record of the engine's events stream (``GET /events``)."""

    id: str
    action: str
    name: str
    exit_code: int | None = None
    time_ns: int | None = None

    @classmethod
    def parse(cls, record: Mapping[str, Any]) -> Event:
        """Read one JSON record of the events stream (its current and older fields)."""
        actor = record.get("Actor") or {}
        attributes = actor.get("Attributes") or {}
        action = str(record.get("Action") or record.get("status") or "")
        exit_code, time_ns = str(attributes.get("exitCode", "")), record.get("timeNano")
        return cls(
            id=str(actor.get("ID") or record.get("id") or ""),
            action=action.split(":", 1)[0],
            name=str(attributes.get("name") or ""),
            exit_code=int(exit_code) if exit_code.lstrip("-").isdigit() else None,
            time_ns=int(time_ns) if isinstance(time_ns, int) else None,
        )


@attrs.frozen
class Network:
    """A network of the engine's listing (``GET /networks``)."""

    id: str
    created_ns: int | None


class StreamBody:
    """The body of a streamed engine response (events, logs), read cancel-safely."""

    def __init__(self, response: Any, errors: Callable[[], ContextManager[None]]) -> None:
        self._response = response
        self._errors = errors
        self.buffer = bytearray()
        self.eof = False

    async def fill(self) -> None:
        """Wait for more of the body and append it; sets :attr:`eof` at its end."""
        if self.eof:
            return
        with self._errors():
            chunk: bytes = await self._response.content.readany()
        if chunk:
            self.buffer.extend(chunk)
        else:
            self.eof = True


class EngineEvents(StreamBody):
    """The engine's events stream (``GET /events``, JSON lines) for one filter, opened again
    when the engine restarts under it."""

    def __init__(
        self,
        response: Any,
        errors: Callable[[], ContextManager[None]],
        reopen: Callable[[int], Awaitable[Any]],
    ) -> None:
        super().__init__(response, errors)
        self._reopen = reopen
        #: the stream was cut (and is opened again): the events meanwhile are lost; set until read
        self.resumed = False

    async def fill(self) -> None:
        """Wait for more events; if the stream is cut, set :attr:`resumed`, wait for the engine
        to answer again (:meth:`Engine.answering`) and subscribe anew."""
        try:
            await super().fill()
        except DockerEngineUnreachableError:
            self.eof = True
        if self.eof:
            self.resumed = True
            self._response = await self._reopen(time.time_ns())
            self.buffer.clear()
            self.eof = False

    def pop(self) -> list[Event]:
        """Return the events received whole so far, oldest first, and forget them."""
        end = self.buffer.rfind(b"\n")
        if end < 0:
            return []
        raw = bytes(self.buffer[: end + 1])
        del self.buffer[: end + 1]
        return [Event.parse(json.loads(line)) for line in raw.splitlines() if line.strip()]

    async def next_batch(self) -> list[Event]:
        """Await at least one event; return every event received so far, oldest first."""
        while not (events := self.pop()):
            await self.fill()
        return events


class Engine(DockerEngine):
    """``local_docker``'s engine."""

    def __init__(
        self, docker_host: str | None, session_name: str, backend: str = "local_docker"
    ) -> None:
        super().__init__(docker_host, session_name, backend)

    async def inspect(self, cid: str) -> Container | None:
        """Inspect a container; ``None`` if the engine has no such container (404)."""
        info = None
        async with self._request(f"GET containers/{cid}/json", done=(404,)) as docker:
            info = await docker.containers.container(cid).show()
        return None if info is None else Container.from_inspect(info)

    async def containers(self, label: str) -> list[Container]:
        """List every container (running or not) that has ``label``."""
        filters = json.dumps({"label": [label]})
        async with self._request("GET containers/json") as docker:
            listed = await docker.containers.list(all=True, filters=filters)
        # aiodocker's DockerContainer reads as a mapping by key only
        fields = ("Id", "Names", "Image", "Labels", "State", "Status", "Created")
        return [Container.from_listing({k: c[k] for k in fields if k in c}) for c in listed]

    async def run_container(self, name: str, config: Mapping[str, Any]) -> None:
        """Create the container ``name`` from ``config`` and start it (``docker run -d``)."""
        async with self._request("POST containers/create") as docker:
            container = await docker.containers.create(config, name=name)
        async with self._request(f"POST containers/{container.id}/start"):
            await container.start()

    async def stop_container(self, cid: str, grace: int) -> None:
        """Stop a container as ``docker stop -t grace`` (seconds); a removed one is done."""
        async with self._request(f"POST containers/{cid}/stop", done=(404,)) as docker:
            await docker.containers.container(cid).stop(t=grace)

    async def remove_container(self, cid: str) -> None:
        """Remove a container with its anonymous volumes, killing it if it runs."""
        async with self._request(f"DELETE containers/{cid}", done=(404, 409)) as docker:
            await docker.containers.container(cid).delete(force=True, v=True)

    async def wait_stopped(self, cid: str) -> None:
        """Return when the container is next not running (the engine's wait endpoint)."""
        async with self._request(f"POST containers/{cid}/wait", done=(404, 409)) as docker:
            await docker.containers.container(cid).wait(condition="not-running")

    async def volume_labels(self, name: str) -> Mapping[str, str] | None:
        """The labels of the volume ``name``; ``None`` if there is no such volume (404)."""
        from aiodocker.volumes import DockerVolume

        info = None
        async with self._request(f"GET volumes/{name}", done=(404,)) as docker:
            info = await DockerVolume(docker, name).show()  # type: ignore[no-untyped-call]
        return None if info is None else dict(info.get("Labels") or {})

    async def labelled_volumes(self, label: str) -> list[Mapping[str, str]]:
        """The labels of every volume that has ``label`` (a key, or ``key=value``)."""
        async with self._request("GET volumes") as docker:
            listed = await docker.volumes.list(filters={"label": [label]})
        return [dict(volume.get("Labels") or {}) for volume in listed.get("Volumes") or []]

    async def create_volume(self, name: str, labels: Mapping[str, str]) -> None:
        """Create the volume ``name`` with ``labels`` (the engine keeps an existing one)."""
        async with self._request("POST volumes/create") as docker:
            await docker.volumes.create({"Name": name, "Labels": dict(labels)})

    async def remove_volume(self, name: str) -> None:
        """Remove the volume ``name``; one gone (404) or in use by a removal (409) is done."""
        from aiodocker.volumes import DockerVolume

        async with self._request(f"DELETE volumes/{name}", done=(404, 409)) as docker:
            await DockerVolume(docker, name).delete()  # type: ignore[no-untyped-call]

    async def networks(self, name: str) -> list[Network]:
        """List the networks named exactly ``name`` (the engine's filter matches prefixes)."""
        async with self._request("GET networks") as docker:
            listed = await docker.networks.list(filters={"name": [name]})
        return [
            Network(str(entry["Id"]), parse_rfc3339_ns(entry.get("Created")))
            for entry in listed
            if entry.get("Name") == name
        ]

    async def create_network(self, name: str, labels: Mapping[str, str]) -> str:
        """Create the bridge network ``name`` with ``labels``; return its id."""
        config = {"Name": name, "Driver": "bridge", "CheckDuplicate": True, "Labels": dict(labels)}
        async with self._request("POST networks/create") as docker:
            network = await docker.networks.create(config)
        return str(network.id)

    async def remove_network(self, network_id: str) -> None:
        """Remove the network ``network_id``; one removed already (404) is done."""
        from aiodocker.networks import DockerNetwork

        async with self._request(f"DELETE networks/{network_id}", done=(404,)) as docker:
            await DockerNetwork(docker, network_id).delete()  # type: ignore[no-untyped-call]

    @contextlib.asynccontextmanager
    async def stream(self, path: str, params: Mapping[str, str]) -> AsyncIterator[StreamBody]:
        """Open a streamed ``GET`` (logs); its body is closed on exit, even by cancel."""
        async with self._stream_get(path, params) as response:
            yield StreamBody(response, functools.partial(self._errors, f"GET {path}"))

    @contextlib.asynccontextmanager
    async def _stream_get(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Any]:
        """The raw response of a streamed ``GET``: aiodocker's private ``_query``, as its
        ``log`` decodes frames to text and ends quietly on a cut, and ``events`` shares filters.
        """
        docker = await self.connect()
        async with contextlib.AsyncExitStack() as stack:
            with self._errors(f"GET {path}"):
                query = docker._query(path, "GET", params=dict(params), timeout=None)
                response = await stack.enter_async_context(query)
            try:
                yield response
            finally:
                response.close()

    @contextlib.asynccontextmanager
    async def events(
        self, filters: Mapping[str, list[str]], since_ns: int | None = None
    ) -> AsyncIterator[EngineEvents]:
        """Subscribe to events matching ``filters``, replayed from ``since_ns`` (ns).

        Once entered no later event is missed: inspect after entering, and take each event
        as a prompt to inspect again.
        """
        params = {"filters": json.dumps(dict(filters))}

        async with contextlib.AsyncExitStack() as stack:

            async def subscribe(since: int) -> Any:
                query = dict(params, since=ns_to_engine(since))
                return await stack.enter_async_context(self._stream_get("events", query))

            async def reopen(cut_ns: int) -> Any:
                logger.warning("the Docker engine's events stream was cut: waiting for it")
                await self.answering()
                logger.warning("the Docker engine answers again")
                return await subscribe(cut_ns - EVENTS_SKEW_NS)

            since = time.time_ns() - EVENTS_SKEW_NS if since_ns is None else since_ns
            errors = functools.partial(self._errors, "GET events")
            yield EngineEvents(await subscribe(since), errors, reopen)

    async def answering(self) -> None:
        """Return once the engine answers ``GET /version`` (the toolkit's :func:`answered`)."""
        await answered(self._version)

    async def _version(self) -> None:
        async with self._request("GET version") as docker:
            await docker.version()

    async def started_ns(self) -> int | None:
        """When the engine started (ns since the epoch): it makes its ``bridge`` network anew at
        every start. ``None`` without one."""
        bridges = await self.networks("bridge")
        return bridges[0].created_ns if bridges else None

    async def ensure_images(self, images: set[str]) -> None:
        """Pull each image the engine does not have, concurrently (TorchX pulls every time)."""

        async def ensure(image: str) -> None:
            found = None
            async with self._request(f"GET images/{image}/json", done=(404,)) as docker:
                found = await docker.images.inspect(image)
            if found is not None:
                return
            try:
                async with self._request(f"POST images/create?fromImage={image}") as docker:
                    await docker.images.pull(image)
            except DockerEngineError as err:
                raise DockerEngineError(
                    err.status,
                    f"image {image!r} is not on the engine and pulling it failed"
                    f" ({err.message}): build or load it first (docker build/import/load)"
                    " or fix Role.image",
                    request=err.request,
                ) from err

        await gather(functools.partial(ensure, image) for image in sorted(images))


async def _answers(docker_host: str | None, timeout: float) -> bool:
    engine = Engine(docker_host, "has_docker")
    try:
        with anyio.fail_after(timeout):
            await engine.connect()
    except Exception:  # no aiodocker, no engine, a URL it cannot reach: not usable
        return False
    finally:
        await engine.close()
    return True


def has_docker(docker_host: str | None = None, timeout: float = 2.0) -> bool:
    """Return True if aiodocker is installed and the engine answers ``GET /version``.

    TorchX's ``docker_scheduler.has_docker``; synchronous, also inside an event loop.

    Args:
        docker_host: the engine's URL; None: ``DOCKER_HOST``, the Docker context or socket.
        timeout: the most seconds to wait for the answer; never raises.
    """
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _answers(docker_host, timeout)).result()
