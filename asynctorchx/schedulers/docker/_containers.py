"""An app's containers on the engine: create and start, find, describe, watch, list, stop,
remove.

The engine keeps all of an app's state, in its containers (found by TorchX's
``torchx.pytorch.org/app-id`` label, as TorchX 0.7.0's
``torchx.schedulers.docker_scheduler`` labels them) and, once cancelled, in a marker
volume ``asynctorchx-cancelled-<app_id>`` labelled with the cancel's time. So any
process can describe, list or cancel any app.

TorchX 0.7.0's ``torchx.schedulers.docker_scheduler`` has no wait of its own (the runner
polls ``describe``); :func:`watch` subscribes to the engine's events for the app's
containers before its first inspect, so no change is missed, and each event prompts a
fresh look at its container. No polling.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterable

import anyio

from asynctorchx.schedulers.api import DescribeAppResponse, ListAppResponse
from asynctorchx.schedulers.docker._engine import Container, Engine
from asynctorchx.schedulers.docker._errors import DockerEngineError
from asynctorchx.schedulers.docker._request import (
    LABEL_APP_ID,
    LABEL_CANCELLED_AT,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    DockerContainer,
    DockerJob,
)
from asynctorchx.schedulers.docker._state import (
    STATE_EVENTS,
    describe_from,
    replica_of,
    replica_state,
    stopped_by_die,
)
from asynctorchx.schedulers.toolkit import LogQuery, app_state, gather, gather_results, race
from asynctorchx.specs.api import AppState, is_terminal

#: The cancel marker volume of app ``<app_id>`` is ``asynctorchx-cancelled-<app_id>``.
CANCEL_MARKER_PREFIX = "asynctorchx-cancelled-"


# --------------------------------------------------------------------------- create


async def create_and_start(engine: Engine, job: DockerJob, network_id: str) -> None:
    """Create and start every container of ``job`` concurrently, on network ``network_id``.

    If any container fails, or this call is cancelled, every container of the app is
    removed (shielded from the cancel) and the first error raised.

    Args:
        engine: the engine.
        job: the request (its images are on the engine).
        network_id: the id of the network the containers join (by id, not by name).

    Raises:
        DockerEngineError: the engine refused a container: its words, then the replica
            and the value refused (see :func:`refused`).
    """

    async def one(container: DockerContainer) -> None:
        config = json.loads(json.dumps(container.config))
        config["HostConfig"]["NetworkMode"] = network_id
        endpoint = config["NetworkingConfig"]["EndpointsConfig"].pop(job.network)
        config["NetworkingConfig"]["EndpointsConfig"][network_id] = endpoint
        try:
            await engine.run_container(container.name, config)
        except DockerEngineError as err:
            raise refused(err, container) from err

    try:
        await gather(functools.partial(one, container) for container in job.containers)
    except BaseException:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(Exception):
                await delete_app(engine, job.app_id)
        raise


def refused(err: DockerEngineError, container: DockerContainer) -> DockerEngineError:
    """The engine's refusal of ``container``, naming its replica and the value refused.

    The engine's words (``Minimum memory limit allowed is 6MB``) name neither the app's
    role nor the field of the request; this adds them, e.g. ``(replica trainer/0:
    Resource(memMB=1))``, for the fields the engine's words are about: memory (and
    ``/dev/shm``, sized by ``memMB`` too), CPUs, devices, the image.

    Args:
        err: what the engine answered.
        container: the container it refused.
    """
    labels, host = container.config["Labels"], container.config["HostConfig"]
    words = err.message.lower()
    if ("memory" in words or "shm" in words) and "Memory" in host:
        value = f"Resource(memMB={host['Memory'] // 2**20})"
    elif "cpu" in words and "NanoCpus" in host:
        value = f"Resource(cpu={host['NanoCpus'] / 1e9:g})"
    elif "device" in words and host.get("Devices"):
        value = f"devices {[device['PathOnHost'] for device in host['Devices']]}"
    elif "device" in words and host.get("DeviceRequests"):
        value = f"Resource(gpu={host['DeviceRequests'][0]['Count']})"
    elif "image" in words:
        value = f"image {container.image!r}"
    else:
        value = f"container {container.name!r}"
    replica = f"{labels[LABEL_ROLE_NAME]}/{labels[LABEL_REPLICA_ID]}"
    message = f"{err.message} (replica {replica}: {value}); change it and submit again"
    return DockerEngineError(err.status, message, err.request)


# --------------------------------------------------------------------------- read


async def list_containers(engine: Engine, app_id: str | None) -> list[Container]:
    """Every container of the app, from the engine's listing (``GET /containers/json``).

    Args:
        engine: the engine.
        app_id: the app; ``None``: every app's (asynctorchx's and TorchX's).
    """
    return await engine.containers(LABEL_APP_ID if app_id is None else f"{LABEL_APP_ID}={app_id}")


async def _inspect_all(engine: Engine, ids: Iterable[str]) -> dict[str, Container]:
    """Inspect the containers concurrently, by id; those removed meanwhile are left out."""
    ids = list(ids)
    found = await gather_results(functools.partial(engine.inspect, cid) for cid in ids)
    return {cid: container for cid, container in zip(ids, found, strict=True) if container}


async def cancelled_at(engine: Engine, app_id: str) -> int | None:
    """When the app was cancelled (ns since the epoch, from its marker), or ``None``.

    Args:
        engine: the engine.
        app_id: the app.
    """
    labels = await engine.volume_labels(f"{CANCEL_MARKER_PREFIX}{app_id}")
    return None if labels is None else int(labels.get(LABEL_CANCELLED_AT, "0"))


async def inspect_app(
    engine: Engine, app_id: str, ids: list[str] | None = None, marker: bool = True
) -> tuple[dict[str, Container], int | None]:
    """Inspect the app's containers and, if ``marker``, read its cancel marker, at once.

    Args:
        engine: the engine.
        app_id: the app.
        ids: the ids of the containers to inspect; ``None``: every container of the app
            (one listing first; none listed: nothing else is read).
        marker: read the cancel marker too (else its time is returned as ``None``).

    Returns:
        the containers still there, by id, from their inspects, and the cancel time (ns)
        or ``None``.
    """
    if ids is None:
        ids = [container.id for container in await list_containers(engine, app_id)]
        if not ids:
            return {}, None
    if not marker:
        return await _inspect_all(engine, ids), None
    inspected, cancelled = await gather_results(
        [
            functools.partial(_inspect_all, engine, ids),
            functools.partial(cancelled_at, engine, app_id),
        ]
    )
    return inspected, cancelled


async def describe(engine: Engine, app_id: str) -> DescribeAppResponse | None:
    """Describe the app from its containers (see ``describe_from``).

    Args:
        engine: the engine.
        app_id: a valid app id.

    Returns:
        the description, or ``None`` if the engine has no container of the app.
    """
    inspected, cancelled = await inspect_app(engine, app_id)
    return describe_from(app_id, inspected.values(), cancelled) if inspected else None


async def _cancelled_apps(engine: Engine) -> dict[str, int]:
    """The apps that have a cancel marker, with when they were cancelled (ns since the
    epoch): one volume listing."""
    return {
        str(labels.get(LABEL_APP_ID)): int(labels.get(LABEL_CANCELLED_AT, "0"))
        for labels in await engine.labelled_volumes(LABEL_CANCELLED_AT)
    }


async def list_apps(engine: Engine) -> list[ListAppResponse]:
    """Every app the engine has containers of (asynctorchx's and TorchX's), by app id.

    One container listing and one volume listing. A container the listing reports as
    finished keeps its listed state: the engine lists a container as exited only once
    its exit is recorded. One it reports as live is inspected (as :func:`describe`
    does): the listing comes from a view of the engine that lags behind an exit (right
    after a ``die`` event it still says ``running``), while an inspect waits for the exit
    to be recorded; one removed meanwhile is left out. Every container of a cancelled app
    is inspected too, since only a replica's finish time tells whether the cancel ended
    it. Each app's state is then :func:`describe`'s, by the same rules.

    Args:
        engine: the engine.
    """
    listed, cancelled = await gather_results(
        [
            functools.partial(list_containers, engine, None),
            functools.partial(_cancelled_apps, engine),
        ]
    )
    stale = {
        c.id
        for c in listed
        if c.labels[LABEL_APP_ID] in cancelled or not is_terminal(replica_state(c, None)[0])
    }
    fresh = await _inspect_all(engine, stale)
    per_app: dict[str, list[AppState]] = {}
    for container in listed:
        app_id = container.labels[LABEL_APP_ID]
        current = fresh.get(container.id) if container.id in stale else container
        if current is not None:
            state, _ = replica_state(current, cancelled.get(app_id))
            per_app.setdefault(app_id, []).append(state)
    return [
        ListAppResponse(app_id=app_id, state=app_state(states, cancelled=app_id in cancelled))
        for app_id, states in sorted(per_app.items())
    ]


async def find_container(engine: Engine, app_id: str, query: LogQuery) -> Container | None:
    """Inspect the container of the replica ``query`` reads (``role_name``, ``k``).

    Args:
        engine: the engine.
        app_id: a valid app id.
        query: the log query; its role and replica are checked against the app's
            containers (:meth:`~asynctorchx.schedulers.toolkit.LogQuery.check_replica`).

    Returns:
        the container, from its inspect, or ``None`` if the engine has no container of
        the app.

    Raises:
        ValueError: the app has no role ``role_name``, the role has no replica ``k``,
            or that replica's container was removed.
    """
    containers = await list_containers(engine, app_id)
    if not containers:
        return None
    replica_counts: dict[str, int] = {}
    for container in containers:
        role, replica_id = replica_of(container.labels)
        replica_counts[role] = max(replica_counts.get(role, 0), replica_id + 1)
    query.check_replica(app_id, replica_counts)
    wanted = [c.id for c in containers if replica_of(c.labels) == (query.role_name, query.k)]
    if wanted and (inspected := await engine.inspect(wanted[0])) is not None:
        return inspected
    raise ValueError(
        f"replica {query.k} of role {query.role_name!r} of app {app_id!r} has no container"
        " any more (it was removed)"
    )


async def watch(
    engine: Engine, app_id: str, done: Callable[[DescribeAppResponse], bool]
) -> DescribeAppResponse | None:
    """Describe the app after every event of its containers until ``done`` says so.

    Subscribes to the app's container events, then lists and inspects its containers.
    Each event prompts a fresh look at its container (and at the cancel marker while the
    app is not cancelled): a ``die`` after which no restart can follow says by itself
    that the container stopped, with its exit code (:func:`stopped_by_die`); any other
    event, or any event of a cancelled app (whose replicas' finish times decide whether
    the cancel ended them), prompts an inspect. A terminal state is returned only once
    every container's processes are gone. A
    container that is ``restarting`` is also awaited on the engine's wait endpoint: when
    the engine fails to start it again (its bind source is gone, say) it marks it exited
    without logging any event.

    Args:
        engine: the engine.
        app_id: a valid app id.
        done: whether a description is the one awaited.

    Returns:
        the first description ``done`` accepts, or ``None`` once the app has no
        container (unknown, or all removed).

    Raises:
        SchedulerUnavailableError: no engine, or it closed the events stream.
    """
    filters = {
        "type": ["container"],
        "label": [f"{LABEL_APP_ID}={app_id}"],
        "event": list(STATE_EVENTS),
    }
    async with engine.events(filters) as events:
        containers, cancelled_at_ns = await inspect_app(engine, app_id)
        while containers:
            response = describe_from(app_id, containers.values(), cancelled_at_ns)
            if done(response):
                return response
            restarting = [cid for cid, found in containers.items() if found.status == "restarting"]
            waits: list[Callable[[], Awaitable[str | None]]] = [events.fill]
            waits += (functools.partial(_stopped, engine, cid) for cid in restarting)
            stopped = await race(waits)
            latest = {event.id: event for event in events.pop()}
            prompted = latest.keys() | ({stopped} if stopped else set())
            if not prompted:
                continue
            down = {
                cid: after
                for cid, event in latest.items()
                if cancelled_at_ns is None and cid in containers and cid != stopped
                if (after := stopped_by_die(containers[cid], event)) is not None
            }
            fresh, marker = await inspect_app(
                engine, app_id, sorted(prompted - down.keys()), marker=cancelled_at_ns is None
            )
            if cancelled_at_ns is None:
                cancelled_at_ns = marker
                if marker is not None and down:  # the cancel came first: finish times decide
                    fresh.update(await _inspect_all(engine, down))
                    down = {}
            for cid in prompted:
                containers.pop(cid, None)
            containers.update(fresh)
            containers.update(down)
    return None


async def _stopped(engine: Engine, cid: str) -> str:
    """Return ``cid`` once the restarting container is next not running."""
    await engine.wait_stopped(cid)
    return cid


# --------------------------------------------------------------------------- stop, remove


async def stop_all(engine: Engine, app_id: str, stop_timeout: float) -> None:
    """Record the app's cancel in the engine, then stop all its containers at once.

    The marker volume is written first, so every process describes the app as
    cancelled from then on. Each container gets the stop signal, then SIGKILL after
    ``stop_timeout`` seconds (as ``docker stop -t``); returns when all have stopped.

    Args:
        engine: the engine.
        app_id: the app.
        stop_timeout: seconds between the stop signal and SIGKILL, rounded up to whole seconds
            as the engine takes them.
    """
    labels = {LABEL_APP_ID: app_id, LABEL_CANCELLED_AT: str(time.time_ns())}
    await engine.create_volume(f"{CANCEL_MARKER_PREFIX}{app_id}", labels)
    grace = max(0, math.ceil(stop_timeout))
    await gather(
        functools.partial(engine.stop_container, c.id, grace)
        for c in await list_containers(engine, app_id)
    )


async def delete_app(engine: Engine, app_id: str) -> None:
    """Remove every container of the app (running ones are killed) and its cancel marker.

    Each container is removed with its anonymous volumes (``v=1``); the marker volume
    last, so an app being deleted still describes as cancelled meanwhile.

    Args:
        engine: the engine.
        app_id: the app.
    """
    await gather(
        functools.partial(engine.remove_container, c.id)
        for c in await list_containers(engine, app_id)
    )
    await engine.remove_volume(f"{CANCEL_MARKER_PREFIX}{app_id}")
