"""``local_docker``'s requests to the Docker engine, over the shared connection.

:class:`Engine` extends :class:`~asynctorchx.workspace.docker_workspace.DockerEngine`
(the connection and image requests ``kubernetes`` shares) with the container, volume,
network, event and log requests, through aiodocker's public API but for the streamed
reads (:meth:`Engine._stream_get` says why). The engine's JSON documents are read here
into frozen records: :class:`Container`, :class:`Event`, :class:`Network`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractContextManager as ContextManager
from typing import Any

import anyio
import attrs

from asynctorchx.errors import SchedulerUnavailableError
from asynctorchx.schedulers.docker._errors import DockerEngineError
from asynctorchx.schedulers.toolkit import gather, parse_rfc3339_ns
from asynctorchx.workspace.docker_workspace import DockerEngine

#: Events are asked from this long before the subscription (ns): the engine sends its
#: response head before it subscribes, and a remote engine's clock may be a little off.
#: An event replayed twice is harmless: each one only prompts a fresh inspect.
EVENTS_SKEW_NS = 1_000_000_000

#: The exit code in a container listing's ``Status`` text (``docker ps``'s STATUS column).
_EXITED = re.compile(r"Exited \((-?\d+)\)")


def ns_to_engine(ns: int) -> str:
    """Format ``ns`` since the epoch as the engine's ``since``/``until`` parameter
    (seconds.nanoseconds).

    Args:
        ns: nanoseconds since the epoch.
    """
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


@attrs.frozen
class Container:
    """A container as the engine reports it: what ``local_docker`` reads of it.

    Made from an inspect (``GET /containers/{id}/json``, :meth:`from_inspect`) or from a
    listing entry (``GET /containers/json``, :meth:`from_listing`), which holds less: no
    error, finish time, restart count or TTY, and the exit code only in its ``Status``
    text (``Exited (3) 2 seconds ago``).

    Args:
        id: the container's id.
        hostname: ``Config.Hostname``; its name (without the engine's leading ``/``)
            when the engine has none, and in a listing entry.
        image: ``Config.Image``, the image as the container was created with it.
        labels: its labels (TorchX's ``torchx.pytorch.org/...`` among them).
        status: ``State.Status``: ``created``, ``running``, ``restarting``, ``paused``,
            ``removing``, ``exited`` or ``dead`` (the Docker Engine API's names).
        exit_code: ``State.ExitCode`` (the engine says 0 while it runs); ``None`` when a
            listing entry's text has none.
        error: ``State.Error``: why the engine could not start it (``""``: none).
        finished_ns: ``State.FinishedAt`` in ns since the epoch; ``None``: never
            finished (the engine's zero time), or not known (a listing entry).
        restart_count: ``RestartCount``: how often its restart policy restarted it.
        tty: ``Config.Tty``: its log is raw text, not multiplexed frames.
        started_ns: ``State.StartedAt`` in ns since the epoch (its last start); ``None``:
            never started, or not known (a listing entry).
        restart_policy: ``HostConfig.RestartPolicy.Name`` (``""`` or ``no``: none,
            ``always``, ``unless-stopped``, ``on-failure``); ``None``: not known (a
            listing entry).
    """

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

    @classmethod
    def from_inspect(cls, info: Mapping[str, Any]) -> Container:
        """Read a container's inspect (``GET /containers/{id}/json``).

        Args:
            info: the engine's JSON document.
        """
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
        )

    @classmethod
    def from_listing(cls, entry: Mapping[str, Any]) -> Container:
        """Read one entry of a container listing (``GET /containers/json``).

        Args:
            entry: the engine's JSON document of one container.
        """
        names = entry.get("Names") or [""]
        match = _EXITED.search(str(entry.get("Status", "")))
        return cls(
            id=str(entry["Id"]),
            hostname=str(names[0]).lstrip("/"),
            image=str(entry.get("Image", "")),
            labels=dict(entry.get("Labels") or {}),
            status=str(entry.get("State", "")),
            exit_code=int(match.group(1)) if match else None,
        )


@attrs.frozen
class Event:
    """One record of the engine's events stream (``GET /events``).

    Args:
        id: the id of the object it is about (``Actor.ID``).
        action: what happened (``die``, ``start``, ``create``...), without the
            ``: detail`` some actions carry.
        name: the object's name (``Actor.Attributes.name``; ``""`` if none).
        exit_code: a container's exit code, in its ``die`` event
            (``Actor.Attributes.exitCode``); ``None`` in other events.
        time_ns: when the engine logged it (``timeNano``, ns since the epoch); ``None``
            if the record has no time.
    """

    id: str
    action: str
    name: str
    exit_code: int | None = None
    time_ns: int | None = None

    @classmethod
    def parse(cls, record: Mapping[str, Any]) -> Event:
        """Read one JSON record of the events stream (its current and older fields).

        Args:
            record: the engine's JSON document of one event.
        """
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
    """A network of the engine's listing (``GET /networks``).

    Args:
        id: the network's id.
        created_ns: when the engine created it, ns since the epoch (``None``: not said).
    """

    id: str
    created_ns: int | None


class StreamBody:
    """The body of a streamed engine response (events, logs), read cancel-safely.

    :meth:`fill` appends what arrived to :attr:`buffer`; cancelling it loses no byte
    (aiohttp's ``readany`` takes the data only after its wait), so it can be raced.

    Args:
        response: the aiohttp response, owned by :meth:`Engine.stream` (it closes it).
        errors: maps the errors raised inside it (:meth:`Engine._errors` of the request).
    """

    def __init__(self, response: Any, errors: Callable[[], ContextManager[None]]) -> None:
        self._response = response
        self._errors = errors
        self.buffer = bytearray()
        self.eof = False

    async def fill(self) -> None:
        """Wait for more of the body and append it; sets :attr:`eof` at its end.

        Raises:
            SchedulerUnavailableError: the connection to the engine broke (a body cut
                short raises: the engine marks a body's end).
        """
        if self.eof:
            return
        with self._errors():
            chunk: bytes = await self._response.content.readany()
        if chunk:
            self.buffer.extend(chunk)
        else:
            self.eof = True


class EngineEvents(StreamBody):
    """The engine's events stream (``GET /events``, JSON lines) for one filter."""

    async def fill(self) -> None:
        """Wait for more events (see :meth:`StreamBody.fill`).

        Raises:
            SchedulerUnavailableError: the engine closed the stream (it stopped), or the
                connection broke.
        """
        await super().fill()
        if self.eof:
            raise SchedulerUnavailableError(
                "the Docker engine closed its events stream (was it stopped?):"
                " check `docker info`, then retry"
            )

    def pop(self) -> list[Event]:
        """Return the events received whole so far, oldest first, and forget them."""
        end = self.buffer.rfind(b"\n")
        if end < 0:
            return []
        raw = bytes(self.buffer[: end + 1])
        del self.buffer[: end + 1]
        return [Event.parse(json.loads(line)) for line in raw.splitlines() if line.strip()]

    async def next_batch(self) -> list[Event]:
        """Await at least one event; return every event received so far, oldest first.

        Raises:
            SchedulerUnavailableError: the engine closed the stream (it stopped).
        """
        while not (events := self.pop()):
            await self.fill()
        return events


class Engine(DockerEngine):
    """``local_docker``'s engine: the shared connection (:class:`DockerEngine`) with its
    container, volume, network, event and log requests.

    Args:
        docker_host: the engine's URL; ``None``: ``DOCKER_HOST`` or the default socket.
        session_name: the scheduler's session, named in ``SchedulerClosedError``.
        backend: the scheduler the errors name.

    Every request method raises as :class:`DockerEngine`'s do.
    """

    def __init__(
        self, docker_host: str | None, session_name: str, backend: str = "local_docker"
    ) -> None:
        super().__init__(docker_host, session_name, backend)

    async def inspect(self, cid: str) -> Container | None:
        """Inspect a container; ``None`` if the engine has no such container (404).

        Args:
            cid: the container's id (or name).

        Raises:
            DockerEngineError: the engine answered another 4xx/5xx.
        """
        info = None
        async with self._request(f"GET containers/{cid}/json", done=(404,)) as docker:
            info = await docker.containers.container(cid).show()
        return None if info is None else Container.from_inspect(info)

    async def containers(self, label: str) -> list[Container]:
        """List every container (running or not) that has ``label``.

        Args:
            label: the listing's ``label`` filter: ``key`` or ``key=value``.

        Raises:
            DockerEngineError: the engine refused the filter.
        """
        filters = json.dumps({"label": [label]})
        async with self._request("GET containers/json") as docker:
            listed = await docker.containers.list(all=True, filters=filters)
        # aiodocker's DockerContainer reads as a mapping by key only
        fields = ("Id", "Names", "Image", "Labels", "State", "Status")
        return [Container.from_listing({k: c[k] for k in fields if k in c}) for c in listed]

    async def run_container(self, name: str, config: Mapping[str, Any]) -> None:
        """Create the container ``name`` from ``config`` and start it (``docker run -d``).

        Args:
            name: the container's name.
            config: the Docker Engine API's container create body.

        Raises:
            DockerEngineError: the engine refused to create or to start it.
        """
        async with self._request("POST containers/create") as docker:
            container = await docker.containers.create(config, name=name)
        async with self._request(f"POST containers/{container.id}/start"):
            await container.start()

    async def stop_container(self, cid: str, grace: int) -> None:
        """Stop a container: its stop signal, then SIGKILL after ``grace`` seconds (as
        ``docker stop -t``); returns once it stopped. One removed already is done.

        Cancelling it closes the connection (aiohttp's), so the stop is not left running
        on a pooled connection.

        Args:
            cid: the container's id.
            grace: whole seconds between the stop signal and SIGKILL.
        """
        async with self._request(f"POST containers/{cid}/stop", done=(404,)) as docker:
            await docker.containers.container(cid).stop(t=grace)

    async def remove_container(self, cid: str) -> None:
        """Remove a container with its anonymous volumes, killing it if it runs. One
        removed already (404), or being removed (409), is done.

        Args:
            cid: the container's id.
        """
        async with self._request(f"DELETE containers/{cid}", done=(404, 409)) as docker:
            await docker.containers.container(cid).delete(force=True, v=True)

    async def wait_stopped(self, cid: str) -> None:
        """Return when the container is next not running (the engine's wait endpoint).

        Only a backstop for a container that is restarting: if the engine fails to start
        it again, the engine marks it exited without any event. A container that is gone
        (404) or being removed (409) has stopped too.

        Args:
            cid: the container's id.
        """
        async with self._request(f"POST containers/{cid}/wait", done=(404, 409)) as docker:
            await docker.containers.container(cid).wait(condition="not-running")

    async def volume_labels(self, name: str) -> Mapping[str, str] | None:
        """The labels of the volume ``name``; ``None`` if there is no such volume (404).

        Args:
            name: the volume's name.
        """
        from aiodocker.volumes import DockerVolume

        info = None
        async with self._request(f"GET volumes/{name}", done=(404,)) as docker:
            info = await DockerVolume(docker, name).show()  # type: ignore[no-untyped-call]
        return None if info is None else dict(info.get("Labels") or {})

    async def labelled_volumes(self, label: str) -> list[Mapping[str, str]]:
        """The labels of every volume that has ``label`` (a key, or ``key=value``).

        Args:
            label: the listing's ``label`` filter.
        """
        async with self._request("GET volumes") as docker:
            listed = await docker.volumes.list(filters={"label": [label]})
        return [dict(volume.get("Labels") or {}) for volume in listed.get("Volumes") or []]

    async def create_volume(self, name: str, labels: Mapping[str, str]) -> None:
        """Create the volume ``name`` with ``labels`` (the engine keeps an existing one).

        Args:
            name: the volume's name.
            labels: its labels.
        """
        async with self._request("POST volumes/create") as docker:
            await docker.volumes.create({"Name": name, "Labels": dict(labels)})

    async def remove_volume(self, name: str) -> None:
        """Remove the volume ``name``; one removed already (404), or in use by a
        container being removed (409), is done.

        Args:
            name: the volume's name.
        """
        from aiodocker.volumes import DockerVolume

        async with self._request(f"DELETE volumes/{name}", done=(404, 409)) as docker:
            await DockerVolume(docker, name).delete()  # type: ignore[no-untyped-call]

    async def networks(self, name: str) -> list[Network]:
        """List the networks named exactly ``name`` (the engine's filter matches prefixes).

        Args:
            name: the network's name.
        """
        async with self._request("GET networks") as docker:
            listed = await docker.networks.list(filters={"name": [name]})
        return [
            Network(str(entry["Id"]), parse_rfc3339_ns(entry.get("Created")))
            for entry in listed
            if entry.get("Name") == name
        ]

    async def create_network(self, name: str, labels: Mapping[str, str]) -> str:
        """Create the bridge network ``name`` with ``labels``; return its id.

        Args:
            name: the network's name.
            labels: its labels.

        Raises:
            DockerEngineError: the engine refused (409 or "already exists": a network of
                that name exists and the engine checked).
        """
        config = {"Name": name, "Driver": "bridge", "CheckDuplicate": True, "Labels": dict(labels)}
        async with self._request("POST networks/create") as docker:
            network = await docker.networks.create(config)
        return str(network.id)

    async def remove_network(self, network_id: str) -> None:
        """Remove the network ``network_id``; one removed already (404) is done.

        Args:
            network_id: the network's id.
        """
        from aiodocker.networks import DockerNetwork

        async with self._request(f"DELETE networks/{network_id}", done=(404,)) as docker:
            await DockerNetwork(docker, network_id).delete()  # type: ignore[no-untyped-call]

    @contextlib.asynccontextmanager
    async def stream(self, path: str, params: Mapping[str, str]) -> AsyncIterator[StreamBody]:
        """Open a streamed ``GET`` (logs); its body is closed on exit, even by cancel.

        Args:
            path: the API path, e.g. ``containers/{id}/logs``.
            params: the query parameters.

        Raises:
            DockerEngineError: the engine answered 4xx/5xx.
        """
        async with self._stream_get(path, params) as response:
            yield StreamBody(response, functools.partial(self._errors, f"GET {path}"))

    @contextlib.asynccontextmanager
    async def _stream_get(self, path: str, params: Mapping[str, str]) -> AsyncIterator[Any]:
        """The raw aiohttp response of a streamed ``GET``, closed on exit (even by cancel).

        The one call of aiodocker's private ``Docker._query`` (hence the upper bound on
        aiodocker in ``pyproject.toml``), as its public API reads neither stream as needed:
        ``DockerContainer.log`` inspects the container first (a second request), drops each
        frame's stream and stamp-exact bytes (it decodes them to text), and ends quietly
        when the connection breaks, so a cut log would look whole; ``Docker.events`` runs
        one background subscription per client, with its first subscriber's filters.
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
        """Subscribe to the engine's events matching ``filters`` (the events API's).

        Events are replayed from ``since_ns`` (default: ``EVENTS_SKEW_NS`` ago), so once
        this is entered no later event can be missed: inspect after entering, then treat
        each event as a prompt to inspect again. The stream (one HTTP connection, no
        background task) is closed on exit, also when the awaiting task is cancelled.

        Args:
            filters: the events API's ``filters`` (``type``, ``event``, ``label``...).
            since_ns: replay events from this time (ns since the epoch).

        Raises:
            DockerEngineError: the engine refused the filters.
        """
        since = time.time_ns() - EVENTS_SKEW_NS if since_ns is None else since_ns
        params = {"filters": json.dumps(dict(filters)), "since": ns_to_engine(since)}
        async with self._stream_get("events", params) as response:
            yield EngineEvents(response, functools.partial(self._errors, "GET events"))

    async def ensure_images(self, images: set[str]) -> None:
        """Pull each image the engine does not have, concurrently (TorchX pulls every time).

        Args:
            images: image names (or ids).

        Raises:
            DockerEngineError: an image is missing and could not be pulled (the message
                says how to fix it).
        """

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
    """Return True if a Docker engine answers and ``local_docker`` can use it.

    TorchX's ``torchx.schedulers.docker_scheduler.has_docker``, which is true when the
    ``docker`` client library is installed and ``docker.from_env()`` reaches the engine.
    Here: aiodocker is installed and the engine answers ``GET /version``, asked as the
    scheduler asks (the same ``DOCKER_HOST``, Docker context and TLS settings). It is
    synchronous, as TorchX's, and blocks for at most about ``timeout`` seconds (the
    request runs on an event loop of its own, in a thread), also when called from a
    running event loop.

    Args:
        docker_host: the engine's URL (``unix://...``, ``tcp://host:port``...); None:
            ``DOCKER_HOST``, the Docker context, else the default socket, as aiodocker
            finds it.
        timeout: the most seconds to wait for the engine's answer.

    Returns:
        False when aiodocker is not installed or no engine answers within ``timeout``;
        True otherwise. Never raises.
    """
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _answers(docker_host, timeout)).result()
