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
- Finished containers are removed only by :meth:`DockerScheduler.delete`.

aiodocker is imported here only, on first use; aiodocker runs on asyncio only, so under
trio every engine call raises :class:`~asynctorchx.errors.SchedulerUnavailableError`.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import math
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

import anyio

from asynctorchx.errors import (
    DockerEngineError,
    UnknownAppException,
)
from asynctorchx.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    validate_app_id,
)
from asynctorchx.schedulers.docker._concurrency import gather as _gather
from asynctorchx.schedulers.docker._concurrency import race as _race
from asynctorchx.schedulers.docker._engine import Engine, EventStream
from asynctorchx.schedulers.docker._network import ensure_network
from asynctorchx.schedulers.docker._request import (
    LABEL_APP_DEF,
    LABEL_APP_ID,
    LABEL_CANCELLED_AT,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    LABEL_VERSION,
    NETWORK,
    RANK0_ENV,
    DockerContainer,
    DockerJob,
    build_job,
    container_name,
    make_app_id,
    run_opts,
    validate,
)
from asynctorchx.schedulers.docker._state import app_state as _app_state
from asynctorchx.schedulers.docker._state import engine_time as _engine_time
from asynctorchx.schedulers.docker._state import event_action as _event_action
from asynctorchx.schedulers.docker._state import event_id as _event_id
from asynctorchx.schedulers.docker._state import exit_for_good as _exit_for_good
from asynctorchx.schedulers.docker._state import listed_state as _listed_state
from asynctorchx.schedulers.docker._state import ns_to_engine as _ns_to_engine
from asynctorchx.schedulers.docker._state import parse_ts_ns as _parse_ts_ns
from asynctorchx.schedulers.docker._state import replica_state as _replica_state
from asynctorchx.schedulers.docker._workspace import build_workspace
from asynctorchx.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    Role,
    RoleStatus,
    is_terminal,
    make_app_handle,
    runopts,
)
from asynctorchx.specs.converter import from_json

#: Default seconds between the stop signal and SIGKILL on cancel.
DEFAULT_GRACE_S = 10.0

#: Container events that may change a replica's state (``wait``, ``wait_for_state_change``).
_STATE_EVENTS = ("create", "start", "die", "stop", "destroy", "pause", "unpause")
#: Container events after which a followed log has ended (the process is gone).
_STOP_EVENTS = frozenset({"die", "stop", "destroy"})
#: A log follower re-reads from this long before the newest frame it consumed (ns).
_REREAD_NS = 1_000_000_000

_CANCEL_MARKER_PREFIX = "asynctorchx-cancelled-"
#: Container id -> its new events, oldest first.
_EventsById = dict[str, list[dict[str, Any]]]
_LOG_TS = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ")


class _LogLines:
    """Whole log lines from the engine's log frames, over several log requests of one container.

    The engine's log frames carry its timestamp (``timestamps=1``). A follower re-reads
    from a little before the newest frame it consumed (``_REREAD_NS``; the engine's
    ``since`` is inclusive and stdout and stderr frames may be stamped slightly out of
    order), and the frames it consumed then are dropped here, so no line is lost or
    repeated. Frames are reassembled into lines per stream; a line's end in a later frame
    (or a later request) is awaited.

    Args:
        since_ns: drop frames stamped before this (ns since the epoch), or ``None``.
        tty: the container has a TTY: the body is raw text, not multiplexed frames.
    """

    def __init__(self, since_ns: int | None, tty: bool) -> None:
        self.since_ns = since_ns
        self.tty = tty
        self.newest_ns: int | None = None
        self._seen: set[tuple[int, int, int, int]] = set()
        self._order: collections.deque[tuple[int, tuple[int, int, int, int]]] = collections.deque()
        self._partial: dict[int, bytearray] = {1: bytearray(), 2: bytearray()}

    def resume_ns(self) -> int | None:
        """The ``since`` of the next request (ns since the epoch), or ``None`` (the start)."""
        if self.newest_ns is None:
            return self.since_ns
        resume = self.newest_ns - _REREAD_NS
        return resume if self.since_ns is None else max(resume, self.since_ns)

    def take(self, body: bytearray, at_eof: bool) -> list[str]:
        """Consume the whole frames at the start of ``body``; return the lines they finish."""
        lines: list[str] = []
        for kind, payload in self._frames(body, at_eof):
            lines.extend(self._frame(kind, payload))
        return lines

    def flush(self) -> list[str]:
        """Return the unfinished line of each stream as it is (a run's end), and forget it."""
        lines = []
        for buffer in self._partial.values():
            if buffer:
                lines.append(bytes(buffer).decode("utf-8", errors="replace"))
                buffer.clear()
        return lines

    def _frames(self, body: bytearray, at_eof: bool) -> list[tuple[int, bytes]]:
        frames: list[tuple[int, bytes]] = []
        if self.tty:  # raw text: one frame a line
            start = 0
            while (end := body.find(b"\n", start)) >= 0:
                frames.append((1, bytes(body[start : end + 1])))
                start = end + 1
            if at_eof and start < len(body):
                frames.append((1, bytes(body[start:])))
                start = len(body)
            del body[:start]
            return frames
        pos = 0
        while len(body) - pos >= 8:  # header: stream, 0, 0, 0, big-endian payload size
            size = int.from_bytes(body[pos + 4 : pos + 8], "big")
            if len(body) - pos - 8 < size:
                break
            kind = body[pos] if body[pos] in (1, 2) else 1
            frames.append((kind, bytes(body[pos + 8 : pos + 8 + size])))
            pos += 8 + size
        del body[:pos]
        return frames

    def _frame(self, kind: int, payload: bytes) -> list[str]:
        match = _LOG_TS.match(payload)
        if match is not None:
            stamp = _parse_ts_ns(match.group(1).decode())
            payload = payload[match.end() :]
            if stamp is not None:
                if self.since_ns is not None and stamp < self.since_ns:
                    return []
                key = (stamp, kind, len(payload), hash(payload))
                if key in self._seen:
                    return []  # consumed in an earlier request
                self._remember(stamp, key)
        buffer = self._partial[kind]
        buffer.extend(payload)
        lines = []
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            lines.append(bytes(buffer[start : end + 1]).decode("utf-8", errors="replace"))
            start = end + 1
        del buffer[:start]
        return lines

    def _remember(self, stamp: int, key: tuple[int, int, int, int]) -> None:
        self._seen.add(key)
        self._order.append((stamp, key))
        if self.newest_ns is None or stamp > self.newest_ns:
            self.newest_ns = stamp
        horizon = self.newest_ns - _REREAD_NS
        while self._order and self._order[0][0] < horizon:
            self._seen.discard(self._order.popleft()[1])


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
        self._engine = Engine(docker_host, session_name)

    # ------------------------------------------------------------------ the client

    async def _client(self) -> None:
        """Open the engine connection (and check the engine answers) on first use."""
        await self._engine.connect()

    async def close(self) -> None:
        """Close the engine connection; idempotent, never raises. Containers keep running."""
        await self._engine.close()

    # ------------------------------------------------------------------ options, dry run

    def _run_opts(self) -> runopts:
        return run_opts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        validate(app)

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
        network_id = await self._ensure_network(job.network)

        async def create_and_start(container: DockerContainer) -> None:
            config = json.loads(json.dumps(container.config))
            config["HostConfig"]["NetworkMode"] = network_id
            endpoint = config["NetworkingConfig"]["EndpointsConfig"].pop(job.network)
            config["NetworkingConfig"]["EndpointsConfig"][network_id] = endpoint
            created = await self._engine.json(
                "containers/create", "POST", params={"name": container.name}, data=config
            )
            await self._engine.call(f"containers/{created['Id']}/start")

        try:
            await _gather(
                functools.partial(create_and_start, container) for container in job.containers
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await self.delete(job.app_id)
            raise
        return job.app_id

    async def _ensure_network(self, name: str) -> str:
        """Return the id of the bridge network ``name``, creating it once when missing.

        See :func:`~asynctorchx.schedulers.docker._network.ensure_network`.

        Args:
            name: the network's name.
        """
        return await ensure_network(self._engine, name)

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

    async def _containers(self, app_id: str) -> list[dict[str, Any]]:
        filters = json.dumps({"label": [f"{LABEL_APP_ID}={app_id}"]})
        listed: list[dict[str, Any]] = await self._engine.json(
            "containers/json", params={"all": "1", "filters": filters}
        )
        return listed

    async def _inspect_all(self, ids: list[str]) -> list[dict[str, Any]]:
        """Inspect the containers concurrently; those removed meanwhile are left out."""
        results: dict[str, dict[str, Any]] = {}

        async def inspect(cid: str) -> None:
            try:
                results[cid] = await self._engine.json(f"containers/{cid}/json")
            except DockerEngineError as err:
                if err.status != 404:  # removed meanwhile
                    raise

        await _gather(functools.partial(inspect, cid) for cid in ids)
        return [results[cid] for cid in ids if cid in results]

    async def _cancelled_at(self, app_id: str) -> int | None:
        try:
            volume = await self._engine.json(f"volumes/{_CANCEL_MARKER_PREFIX}{app_id}")
        except DockerEngineError as err:
            if err.status == 404:
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

        Args:
            app_id: the app.

        Returns:
            the description, or ``None`` if the engine has no container of the app.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id.
            SchedulerUnavailableError: no engine (see the class).
        """
        validate_app_id(app_id)
        listed = await self._containers(app_id)
        if not listed:
            return None
        ids = [container["Id"] for container in listed]
        inspected, cancelled_at = await self._inspect_and_marker(app_id, ids)
        if not inspected:
            return None
        return self._describe_from(app_id, inspected, cancelled_at)

    async def _inspect_and_marker(
        self, app_id: str, ids: list[str], marker: bool = True
    ) -> tuple[list[dict[str, Any]], int | None]:
        """Inspect the containers ``ids`` and, if ``marker``, read the cancel marker, at once."""
        result: dict[str, Any] = {"inspected": [], "marker": None}

        async def get_marker() -> None:
            result["marker"] = await self._cancelled_at(app_id)

        async def get_inspected() -> None:
            result["inspected"] = await self._inspect_all(ids)

        await _gather([get_inspected, get_marker] if marker else [get_inspected])
        return result["inspected"], result["marker"]

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

        One entry per app, from one container listing and one volume listing: the state
        comes from each container's status text. A cancelled app is described instead
        (inspects), since only a replica's finish time tells whether the cancel ended it:
        its entry then agrees with :meth:`describe`.
        """
        filters = json.dumps({"label": [LABEL_APP_ID]})
        listed = await self._engine.json("containers/json", params={"all": "1", "filters": filters})
        volume_filters = json.dumps({"label": [LABEL_CANCELLED_AT]})
        volumes = await self._engine.json("volumes", params={"filters": volume_filters})
        cancelled = {
            (vol.get("Labels") or {}).get(LABEL_APP_ID) for vol in volumes.get("Volumes") or []
        }
        per_app: dict[str, list[AppState]] = {}
        for container in listed:
            app_id = container["Labels"][LABEL_APP_ID]
            per_app.setdefault(app_id, []).append(_listed_state(container))
        states = {app_id: _app_state(found, False) for app_id, found in per_app.items()}

        async def describe(app_id: str) -> None:
            response = await self.describe(app_id)
            if response is None:
                states.pop(app_id, None)
            else:
                states[app_id] = response.state

        await _gather(
            functools.partial(describe, app_id) for app_id in sorted(per_app) if app_id in cancelled
        )
        return [
            ListAppResponse(app_id=app_id, state=state) for app_id, state in sorted(states.items())
        ]

    # ------------------------------------------------------------------ wait

    async def wait(self, app_id: str, timeout: float | None = None) -> DescribeAppResponse | None:
        """Await the app's terminal state on the engine and return its description.

        An await on the engine's events stream for the app's containers (subscribed before
        the first inspect, so no event is missed); each ``die``, ``stop``, ``start`` or
        ``destroy`` prompts an inspect of that container. A container its restart policy
        restarts is ``restarting`` when its ``die`` arrives (the engine decides before it
        logs the event), so this returns at the app's terminal state, not at a first exit.
        No polling; cancelling the awaiting task closes the stream.

        Args:
            app_id: the app.
            timeout: seconds to wait at most (``None``: no limit).

        Returns:
            the app's description once it is terminal; ``None`` if the engine has no
            container of the app (or all were removed meanwhile).

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id.
            TimeoutError: ``timeout`` seconds passed first.
            SchedulerUnavailableError: no engine, or it closed the events stream.
        """
        validate_app_id(app_id)
        with anyio.fail_after(timeout):
            return await self._watch(app_id, lambda response: is_terminal(response.state))

    async def wait_for_state_change(
        self, app_id: str, state: AppState, timeout: float | None = None
    ) -> DescribeAppResponse | None:
        """Await the app's state differing from ``state`` (an await on engine events).

        Returns at once if it already differs or is terminal. Awaited as :meth:`wait` is.

        Args:
            app_id: the app.
            state: the state to wait out.
            timeout: seconds to wait at most (``None``: no limit).

        Returns:
            the app's description, or ``None`` for an unknown (or removed) app.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id.
            TimeoutError: ``timeout`` seconds passed first.
            SchedulerUnavailableError: no engine, or it closed the events stream.
        """
        validate_app_id(app_id)
        with anyio.fail_after(timeout):
            return await self._watch(
                app_id, lambda response: response.state != state or is_terminal(response.state)
            )

    async def _watch(
        self, app_id: str, done: Callable[[DescribeAppResponse], bool]
    ) -> DescribeAppResponse | None:
        """Describe the app after every event of its containers until ``done`` says so.

        Subscribes to the app's container events, then lists and inspects its containers.
        Each event prompts a fresh inspect of its container, except that a ``die`` the
        engine will not restart is answered at once from the event (see
        :func:`_exit_for_good`): an inspect right after a ``die`` waits ~50 ms for the
        engine to finish its exit handling, and ``wait`` should return sooner. A container
        that is ``restarting`` is also awaited on the engine's wait endpoint: when the
        engine fails to start it again (its bind source is gone, say) it marks it exited
        without logging any event.
        """
        filters = {
            "type": ["container"],
            "label": [f"{LABEL_APP_ID}={app_id}"],
            "event": [*_STATE_EVENTS, "kill"],
        }
        async with self._engine.events(filters) as events:
            listed = await self._containers(app_id)
            ids = [container["Id"] for container in listed]
            inspected, cancelled_at = await self._inspect_and_marker(app_id, ids)
            containers = {info["Id"]: info for info in inspected}
            killed: dict[str, int] = {}  # container -> when it was last sent a signal (ns)
            while containers:
                response = self._describe_from(app_id, list(containers.values()), cancelled_at)
                if done(response):
                    return response
                prompted: _EventsById = {}
                restarting = [
                    cid
                    for cid, info in containers.items()
                    if info["State"].get("Status") == "restarting"
                ]
                await _race(
                    [
                        events.fill,
                        *(functools.partial(self._backstop, cid, prompted) for cid in restarting),
                    ]
                )
                for event in events.pop():
                    cid, action = _event_id(event), _event_action(event)
                    if action == "kill":  # an API signal: the engine will not restart it
                        killed.setdefault(cid, int(event.get("timeNano") or 0))
                        continue
                    if action == "start":
                        killed.pop(cid, None)
                    prompted.setdefault(cid, []).append(event)
                if not prompted:
                    continue
                if all(
                    cid in containers and any(_event_action(e) == "die" for e in evs)
                    for cid, evs in prompted.items()
                ):
                    if cancelled_at is None:
                        cancelled_at = await self._cancelled_at(app_id)
                    exits = {
                        cid: _exit_for_good(containers[cid], evs, killed.get(cid), cancelled_at)
                        for cid, evs in prompted.items()
                    }
                    found = {cid: info for cid, info in exits.items() if info is not None}
                    if len(found) == len(exits):
                        trial = {**containers, **found}
                        response = self._describe_from(app_id, list(trial.values()), cancelled_at)
                        if done(response):
                            return response
                fresh, marker = await self._inspect_and_marker(
                    app_id, sorted(prompted), marker=cancelled_at is None
                )
                if cancelled_at is None:
                    cancelled_at = marker
                for cid in prompted:
                    containers.pop(cid, None)
                containers.update((info["Id"], info) for info in fresh)
            return None

    async def _backstop(self, cid: str, prompted: _EventsById) -> None:
        """Add ``cid`` to ``prompted`` once the restarting container is next not running."""
        await self._engine.wait_stopped(cid)
        prompted.setdefault(cid, [])

    # ------------------------------------------------------------------ cancel, delete

    async def cancel(self, app_id: str, grace: float | None = None) -> None:
        """Stop every container of the app concurrently; the app ends CANCELLED.

        A no-op for an unknown or already finished app. Records the cancellation in the
        engine first (the marker volume), then stops all containers at once: the stop
        signal, then SIGKILL after ``grace`` seconds. Returns when all have stopped.

        Args:
            app_id: the app.
            grace: seconds between the stop signal and SIGKILL (default: the scheduler's
                ``grace``), rounded up to whole seconds as the engine takes them.

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
        await self._engine.json(
            "volumes/create",
            "POST",
            data={
                "Name": f"{_CANCEL_MARKER_PREFIX}{app_id}",
                "Labels": {LABEL_APP_ID: app_id, LABEL_CANCELLED_AT: str(time.time_ns())},
            },
        )
        seconds = max(0, math.ceil(grace))

        async def stop(cid: str) -> None:
            try:
                await self._engine.call(f"containers/{cid}/stop", params={"t": str(seconds)})
            except DockerEngineError as err:
                if err.status not in (304, 404):
                    raise

        await _gather(
            functools.partial(stop, container["Id"]) for container in await self._containers(app_id)
        )

    async def delete(self, app_id: str) -> int:
        """Remove every container of the app (running ones are killed) and its cancel marker.

        Removal is never a side effect of ``describe`` or ``wait``: call this to free them.

        Args:
            app_id: the app.

        Returns:
            how many containers were removed.

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id.
        """
        validate_app_id(app_id)
        containers = await self._containers(app_id)

        async def remove(path: str, params: dict[str, str]) -> None:
            try:
                await self._engine.call(path, "DELETE", params=params)
            except DockerEngineError as err:
                if err.status not in (404, 409):
                    raise

        await _gather(
            functools.partial(remove, f"containers/{container['Id']}", {"force": "1", "v": "1"})
            for container in containers
        )
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
                return await self._engine.json(f"containers/{container['Id']}/json")  # type: ignore[no-any-return]
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
        line without one is yielded as it is when its run ends).

        Args:
            app_id: the app.
            role_name: the role.
            k: the replica id.
            regex: keep only lines where it matches (``re.search``).
            since: only lines the engine stamped at or after this (a naive ``datetime``
                is local time).
            until: only lines stamped at or before this; when following, stop then.
            should_tail: follow the container, across restarts by its restart policy,
                until it has stopped for good (or is removed) and every line was yielded.
                Awaits the engine's events: no polling.
            streams: stdout, stderr or combined (default).

        Raises:
            InvalidAppIdException: ``app_id`` is not a valid id.
            UnknownAppException: the engine has no container of ``app_id``.
            ValueError: the app has no replica ``role_name``/``k``.
        """
        info = await self._find_container(app_id, role_name, k)
        pattern = re.compile(regex) if regex else None
        stream = streams or Stream.COMBINED
        params = {
            "stdout": "1" if stream != Stream.STDERR else "0",
            "stderr": "1" if stream != Stream.STDOUT else "0",
            "timestamps": "1",
        }
        if until is not None:
            params["until"] = _engine_time(until)
        since_ns = int(since.timestamp() * 1_000_000) * 1000 if since is not None else None
        lines = _LogLines(since_ns, bool(info["Config"].get("Tty")))
        cid = info["Id"]
        if should_tail:
            source = self._tail(cid, lines, params, until)
        else:
            source = self._read_logs(cid, lines, params, final=True)
        async with contextlib.aclosing(source) as produced:
            async for line in produced:
                if pattern is None or pattern.search(line):
                    yield line

    async def _read_logs(
        self, cid: str, lines: _LogLines, params: Mapping[str, str], final: bool
    ) -> AsyncGenerator[str, None]:
        """Yield the lines the engine has now (one ``GET /containers/{id}/logs``).

        ``final``: the container's run is over, so an unfinished last line is yielded.
        """
        query = dict(params, follow="0")
        resume = lines.resume_ns()
        if resume is not None:
            query["since"] = _ns_to_engine(max(resume, 0))
        async with self._engine.stream(f"containers/{cid}/logs", query) as body:
            while not body.eof:
                await body.fill()
                for line in lines.take(body.buffer, body.eof):
                    yield line
        if final:
            for line in lines.flush():
                yield line

    async def _tail(
        self, cid: str, lines: _LogLines, params: Mapping[str, str], until: datetime | None
    ) -> AsyncGenerator[str, None]:
        """Follow the container's log across restarts until it stopped for good.

        Subscribes to the container's events first, then loops: inspect; a running
        container's log is followed until a ``die``/``stop``/``destroy`` event (the engine
        may keep a follow open after the exit, or end it before the last lines: the next
        read picks up from the last frame seen); a stopped one's log is read to its end;
        a restarting (or not yet started) one is awaited on its next event. Ends when the
        container is stopped for good, removed, or ``until`` passed.
        """
        deadline = math.inf
        if until is not None:
            deadline = anyio.current_time() + (until.timestamp() - time.time())
        filters = {"type": ["container"], "container": [cid], "event": list(_STATE_EVENTS)}
        async with self._engine.events(filters) as events:
            while anyio.current_time() < deadline:
                try:
                    info = await self._engine.json(f"containers/{cid}/json")
                except DockerEngineError as err:
                    if err.status == 404:
                        return  # removed: its log went with it
                    raise
                status = info["State"].get("Status")
                if status in ("running", "paused"):
                    async for line in self._follow(cid, lines, params, events, deadline):
                        yield line
                    continue
                async for line in self._read_logs(cid, lines, params, final=True):
                    yield line
                if status not in ("restarting", "created"):
                    return  # exited or dead: stopped for good, every line yielded
                waits: list[Callable[[], Awaitable[Any]]] = [events.fill]
                if status == "restarting":  # a failed restart logs no event
                    waits.append(functools.partial(self._engine.wait_stopped, cid))
                if deadline < math.inf:
                    waits.append(functools.partial(anyio.sleep_until, deadline))
                await _race(waits)
                events.pop()  # each event only prompts the next inspect
        # until passed while following: the lines stamped up to it
        async for line in self._read_logs(cid, lines, params, final=True):
            yield line

    async def _follow(
        self,
        cid: str,
        lines: _LogLines,
        params: Mapping[str, str],
        events: EventStream,
        deadline: float,
    ) -> AsyncIterator[str]:
        """Follow a running container's log until it stops (an event) or ``deadline``."""
        query = dict(params, follow="1")
        resume = lines.resume_ns()
        if resume is not None:
            query["since"] = _ns_to_engine(max(resume, 0))
        stopped = False
        async with self._engine.stream(f"containers/{cid}/logs", query) as body:
            while True:
                for line in lines.take(body.buffer, body.eof):
                    yield line
                if any(_event_action(event) in _STOP_EVENTS for event in events.pop()):
                    stopped = True
                    break
                if body.eof or anyio.current_time() >= deadline:
                    break
                waits: list[Callable[[], Awaitable[Any]]] = [body.fill, events.fill]
                if deadline < math.inf:
                    waits.append(functools.partial(anyio.sleep_until, deadline))
                await _race(waits)
        if body.eof and not stopped:
            # The engine ended the follow: the process is exiting and its die event is on
            # its way (the engine logs it once the exit is recorded). Await it so the next
            # inspect sees the run's end instead of reopening the follow in a busy loop.
            with anyio.move_on_after(max(deadline - anyio.current_time(), 0.0)):
                while not any(
                    _event_action(event) in _STOP_EVENTS for event in await events.next_batch()
                ):
                    pass


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
    "DEFAULT_GRACE_S",
    "LABEL_APP_DEF",
    "LABEL_APP_ID",
    "LABEL_CANCELLED_AT",
    "LABEL_REPLICA_ID",
    "LABEL_ROLE_NAME",
    "LABEL_VERSION",
    "NETWORK",
    "RANK0_ENV",
    "DockerContainer",
    "DockerJob",
    "DockerScheduler",
    "container_name",
    "create_scheduler",
    "make_app_id",
]
