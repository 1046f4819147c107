"""An app's containers on the engine: run, describe, watch, list, stop and remove.

All state is on the engine (TorchX's ``app-id`` label and a cancel marker volume), so any
process can describe or cancel any app; :func:`watch` subscribes to events before inspecting.
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
from asynctorchx.schedulers.docker._engine import Container, Engine, EngineEvents
from asynctorchx.schedulers.docker._errors import DockerEngineError, DockerEngineUnreachableError
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
    app_name,
    describe_from,
    killed_by_signal,
    replica_of,
    replica_state,
    stopped_by_die,
)
from asynctorchx.schedulers.toolkit import (
    RECONNECT_MAX_S,
    LogQuery,
    app_state,
    gather,
    gather_results,
    race,
    utc_of_ns,
)
from asynctorchx.specs.api import AppState, EndCause, is_terminal

#: Seconds a replica killed by a signal nobody here sent is held back before it is reported:
#: if the engine stops meanwhile, its shutdown killed it (``EndCause.ENGINE_RESTARTED``).
KILL_SETTLE_S = 2.0

#: Seconds a stopping engine may answer 500 (``database not open``) before it stops answering:
#: twice dockerd's default ``shutdown-timeout``, in which it kills what runs.
SHUTDOWN_S = 30.0

#: The cancel marker volume of app ``<app_id>`` is ``asynctorchx-cancelled-<app_id>``.
CANCEL_MARKER_PREFIX = "asynctorchx-cancelled-"


async def create_and_start(engine: Engine, job: DockerJob, network_id: str) -> None:
    """Create and start every container of ``job`` concurrently, on network ``network_id``."""

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
    """The engine's refusal of ``container``, naming its replica and the value refused."""
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


async def list_containers(engine: Engine, app_id: str | None) -> list[Container]:
    """Every container of the app, from the engine's listing (``GET /containers/json``)."""
    return await engine.containers(LABEL_APP_ID if app_id is None else f"{LABEL_APP_ID}={app_id}")


async def _inspect_all(engine: Engine, ids: Iterable[str]) -> dict[str, Container]:
    """Inspect the containers concurrently, by id; those removed meanwhile are left out."""
    ids = list(ids)
    found = await gather_results(functools.partial(engine.inspect, cid) for cid in ids)
    return {cid: container for cid, container in zip(ids, found, strict=True) if container}


async def cancelled_at(engine: Engine, app_id: str) -> int | None:
    """When the app was cancelled (ns since the epoch, from its marker), or ``None``."""
    labels = await engine.volume_labels(f"{CANCEL_MARKER_PREFIX}{app_id}")
    return None if labels is None else int(labels.get(LABEL_CANCELLED_AT, "0"))


async def inspect_app(
    engine: Engine, app_id: str, ids: list[str] | None = None, marker: bool = True
) -> tuple[dict[str, Container], int | None]:
    """Inspect the app's containers and, if ``marker``, read its cancel marker, at once."""
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
    """Describe the app from its containers (see ``describe_from``)."""
    inspected, cancelled = await inspect_app(engine, app_id)
    return await _described(engine, app_id, inspected, cancelled) if inspected else None


async def _cancelled_apps(engine: Engine) -> dict[str, int]:
    """The apps that have a cancel marker, with when they were cancelled (ns since the epoch)."""
    return {
        str(labels.get(LABEL_APP_ID)): int(labels.get(LABEL_CANCELLED_AT, "0"))
        for labels in await engine.labelled_volumes(LABEL_CANCELLED_AT)
    }


async def list_apps(engine: Engine) -> list[ListAppResponse]:
    """Every app the engine has containers of (asynctorchx's and TorchX's), by app id."""
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
    per_app: dict[str, list[tuple[Container, AppState]]] = {}
    for container in listed:
        app_id = container.labels[LABEL_APP_ID]
        current = fresh.get(container.id) if container.id in stale else container
        if current is not None:
            state, _ = replica_state(current, cancelled.get(app_id))
            per_app.setdefault(app_id, []).append((current, state))
    return [
        _listed(app_id, replicas, app_id in cancelled)
        for app_id, replicas in sorted(per_app.items())
    ]


def _listed(
    app_id: str, replicas: list[tuple[Container, AppState]], cancelled: bool
) -> ListAppResponse:
    """``list``'s line of an app; its end only from inspected containers (no ``FinishedAt``
    in a listing, and an inspect per app would be a request per app)."""
    state = app_state([s for _, s in replicas], cancelled=cancelled)
    created = [c.created_ns for c, _ in replicas if c.created_ns is not None]
    finished = [c.finished_ns for c, _ in replicas if c.finished_ns is not None]
    ended = max(finished) if is_terminal(state) and len(finished) == len(replicas) else None
    return ListAppResponse(
        app_id,
        state,
        name=app_name(replicas[0][0].labels),
        submitted=utc_of_ns(min(created)) if created else None,
        ended=utc_of_ns(ended),
    )


async def find_container(engine: Engine, app_id: str, query: LogQuery) -> Container | None:
    """Inspect the container of the replica ``query`` reads (``role_name``, ``k``)."""
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
    """Describe the app after every event of its containers until ``done`` says so."""
    filters = {
        "type": ["container"],
        "label": [f"{LABEL_APP_ID}={app_id}"],
        "event": list(STATE_EVENTS),
    }
    async with engine.events(filters) as events:
        containers, cancelled_at_ns = await inspect_app(engine, app_id)
        while containers:
            if events.resumed:  # the engine restarted: what it did meanwhile is read anew
                events.resumed = False
                containers, cancelled_at_ns = await _inspect_answered(engine, app_id)
                continue
            try:
                response = await _described(engine, app_id, containers, cancelled_at_ns)
            except DockerEngineUnreachableError:
                containers, cancelled_at_ns = await _inspect_answered(engine, app_id)
                continue
            if done(response) and not await _engine_stopping(events, response, containers):
                return response
            if events.resumed:
                continue
            restarting = [cid for cid, found in containers.items() if found.status == "restarting"]
            waits: list[Callable[[], Awaitable[str | None]]] = [events.fill]
            waits += (functools.partial(_stopped, engine, cid) for cid in restarting)
            stopped = await race(waits)
            latest = {event.id: event for event in events.pop()}
            prompted = latest.keys() | ({stopped} if stopped else set())
            if not prompted or events.resumed:
                continue
            down = {
                cid: after
                for cid, event in latest.items()
                if cancelled_at_ns is None and cid in containers and cid != stopped
                if (after := stopped_by_die(containers[cid], event)) is not None
            }
            try:
                fresh, marker = await inspect_app(
                    engine, app_id, sorted(prompted - down.keys()), marker=cancelled_at_ns is None
                )
            except DockerEngineUnreachableError:
                containers, cancelled_at_ns = await _inspect_answered(engine, app_id)
                continue
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
    """Return ``cid`` once the restarting container is next not running (never while the
    engine does not answer: the events stream waits for it)."""
    try:
        await engine.wait_stopped(cid)
    except DockerEngineUnreachableError:
        await anyio.sleep_forever()
    return cid


async def _engine_stopping(
    events: EngineEvents, response: DescribeAppResponse, containers: dict[str, Container]
) -> bool:
    """A replica killed unasked: wait :data:`KILL_SETTLE_S` for the engine to stop (its events
    stream cut), as its shutdown kills what runs before it stops answering."""
    if response.cause != EndCause.EXITED or not any(map(killed_by_signal, containers.values())):
        return False
    with anyio.move_on_after(KILL_SETTLE_S):
        while not events.resumed:
            await events.fill()
            events.pop()
    return events.resumed


async def _inspect_answered(engine: Engine, app_id: str) -> tuple[dict[str, Container], int | None]:
    """:func:`inspect_app` once the engine answers again (while it shuts down it answers some
    requests 500: asked again, for at most :data:`SHUTDOWN_S` seconds)."""
    refusals = 0
    while True:
        await engine.answering()
        try:
            return await inspect_app(engine, app_id)
        except DockerEngineUnreachableError:
            continue
        except DockerEngineError as error:
            refusals += 1
            if error.status < 500 or refusals * RECONNECT_MAX_S > SHUTDOWN_S:
                raise
        await anyio.sleep(RECONNECT_MAX_S)


async def _described(
    engine: Engine, app_id: str, containers: dict[str, Container], cancelled_at_ns: int | None
) -> DescribeAppResponse:
    """:func:`describe_from`, with when the engine started if a replica was killed unasked."""
    killed = cancelled_at_ns is None and any(map(killed_by_signal, containers.values()))
    started_ns = await engine.started_ns() if killed else None
    return describe_from(app_id, containers.values(), cancelled_at_ns, started_ns)


async def stop_all(engine: Engine, app_id: str, stop_timeout: float) -> None:
    """Record the app's cancel in the engine, then stop all its containers at once."""
    labels = {LABEL_APP_ID: app_id, LABEL_CANCELLED_AT: str(time.time_ns())}
    await engine.create_volume(f"{CANCEL_MARKER_PREFIX}{app_id}", labels)
    grace = max(0, math.ceil(stop_timeout))
    await gather(
        functools.partial(engine.stop_container, c.id, grace)
        for c in await list_containers(engine, app_id)
    )


async def delete_app(engine: Engine, app_id: str) -> None:
    """Remove every container of the app (running ones are killed) and its cancel marker."""
    await gather(
        functools.partial(engine.remove_container, c.id)
        for c in await list_containers(engine, app_id)
    )
    await engine.remove_volume(f"{CANCEL_MARKER_PREFIX}{app_id}")
