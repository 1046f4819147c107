"""Pure decision tables: container records in, replica and app states out (no I/O).

The container-to-replica mapping is TorchX 0.7.0's ``docker_scheduler``'s, but a cancelled
replica is CANCELLED.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from asynctorchx.schedulers.api import DescribeAppResponse
from asynctorchx.schedulers.docker._engine import Container, Event
from asynctorchx.schedulers.docker._request import (
    LABEL_APP_DEF,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
)
from asynctorchx.schedulers.toolkit import (
    app_state,
    describe_app,
    role_statuses,
    utc_of_ns,
)
from asynctorchx.specs.api import (
    NONE,
    AppDef,
    AppState,
    EndCause,
    ReplicaStatus,
    Role,
    is_started,
    is_terminal,
)
from asynctorchx.specs.converter import from_json

#: The engine's non-terminal container states (TorchX's ``docker_scheduler`` table).
LIVE_STATES: dict[str, AppState] = {
    "created": AppState.SUBMITTED,
    "restarting": AppState.PENDING,
    "running": AppState.RUNNING,
    "paused": AppState.PENDING,
    "removing": AppState.PENDING,
}

#: A container killed this long (ns) before the engine started was stopped by its shutdown,
#: which kills what runs within its ``shutdown-timeout`` (15 s by default).
SHUTDOWN_WINDOW_NS = 60_000_000_000

#: Container events that may change a replica's state (``wait``, ``wait_for_state_change``).
STATE_EVENTS = ("create", "start", "die", "stop", "destroy", "pause", "unpause")
#: Container events after which a followed log has ended (the process is gone).
STOP_EVENTS = frozenset({"die", "stop", "destroy"})


def replica_state(container: Container, cancelled_at_ns: int | None) -> tuple[AppState, int | None]:
    """Map a container's state to a replica state and exit code."""
    status, exit_code = container.status, container.exit_code
    if status == "created" and cancelled_at_ns is not None and not container.error:
        return AppState.CANCELLED, None
    if not (status in ("exited", "dead") or (status == "created" and container.error)):
        return LIVE_STATES.get(status, AppState.UNKNOWN), None
    finished_ns = container.finished_ns
    if cancelled_at_ns is not None and (finished_ns is None or finished_ns >= cancelled_at_ns):
        return AppState.CANCELLED, exit_code
    if status == "exited" and exit_code == 0:
        return AppState.SUCCEEDED, 0
    return AppState.FAILED, exit_code


def stopped_by_die(container: Container, event: Event) -> Container | None:
    """The container as its ``die`` event leaves it, when that event says it stopped for good."""
    code, at, started = event.exit_code, event.time_ns, container.started_ns
    if event.action != "die" or code is None or at is None or started is None or at < started:
        return None
    if code == 137:  # SIGKILL, perhaps the kernel's OOM killer: only an inspect says which
        return None
    policy = container.restart_policy
    if not (policy in ("", "no") or (policy == "on-failure" and code == 0)):
        return None
    return attrs.evolve(container, status="exited", exit_code=code, finished_ns=at)


def replica_of(labels: Mapping[str, str]) -> tuple[str, int]:
    """The role and replica id of a container, from its labels (TorchX's)."""
    return labels.get(LABEL_ROLE_NAME, ""), int(labels.get(LABEL_REPLICA_ID, "0"))


def _submitted_app(labels: Mapping[str, str]) -> AppDef | None:
    """The ``AppDef`` the app was submitted with (its label), if it has a readable one."""
    if LABEL_APP_DEF not in labels:
        return None
    try:
        return from_json(labels[LABEL_APP_DEF], AppDef)
    except Exception:
        return None


def app_name(labels: Mapping[str, str]) -> str:
    """The app's name from a container's ``AppDef`` label; ``""`` without a readable one."""
    app = _submitted_app(labels)
    return "" if app is None else app.name


def killed_by_signal(container: Container) -> bool:
    """The container exited by SIGKILL or SIGTERM, not at its memory limit."""
    return (
        container.status == "exited"
        and container.exit_code in (137, 143)
        and not container.oom_killed
    )


def describe_from(
    app_id: str,
    inspected: Iterable[Container],
    cancelled_at_ns: int | None,
    engine_started_ns: int | None = None,
) -> DescribeAppResponse:
    """Describe the app from its containers' inspects, its cancel time and when the engine
    started (a replica killed in the :data:`SHUTDOWN_WINDOW_NS` before it: by the restart)."""
    rebuilt: dict[str, Role] = {}
    replicas: list[ReplicaStatus] = []
    restarts = 0
    failures: list[str] = []
    oom_killed = engine_restarted = False
    app_def: AppDef | None = None
    ordered = sorted(inspected, key=lambda container: replica_of(container.labels))
    for container in ordered:
        role, replica_id = replica_of(container.labels)
        if app_def is None:
            app_def = _submitted_app(container.labels)
        if role not in rebuilt:
            rebuilt[role] = Role(name=role, image=container.image, num_replicas=0)
        rebuilt[role].num_replicas += 1
        state, exit_code = replica_state(container, cancelled_at_ns)
        start = container.started_ns if is_started(state) else None
        end = container.finished_ns if is_terminal(state) else None
        if start is not None and end is not None:  # the engine may stamp a short run's start
            start = min(start, end)  # after its end
        restarts += container.restart_count
        if state == AppState.FAILED:
            oom_killed = oom_killed or container.oom_killed
            failure = f"{role}/{replica_id} failed with exit code {exit_code}"
            if _stopped_by_restart(container, engine_started_ns):
                engine_restarted = True
                failure = f"{role}/{replica_id} was stopped by the engine's restart"
                failure += f" (exit code {exit_code})"
            failures.append(f"{failure}: {container.error}" if container.error else failure)
        replicas.append(
            ReplicaStatus(
                id=replica_id,
                state=state,
                role=role,
                hostname=container.hostname,
                exit_code=exit_code,
                started=utc_of_ns(start),
                ended=utc_of_ns(end),
            )
        )
    cancelled = cancelled_at_ns is not None
    state_of_app = app_state((replica.state for replica in replicas), cancelled=cancelled)
    cause = None
    if state_of_app == AppState.FAILED:  # State.OOMKilled of the engine's inspect
        cause = EndCause.OUT_OF_MEMORY if oom_killed else EndCause.EXITED
        cause = EndCause.ENGINE_RESTARTED if engine_restarted and not oom_killed else cause
    messages = (["cancelled"] if state_of_app == AppState.CANCELLED else []) + failures
    submitted = [role.name for role in app_def.roles] if app_def else []
    return describe_app(
        app_id,
        role_statuses(replicas, [name for name in submitted if name in rebuilt]),
        cancelled=cancelled,
        num_restarts=restarts,
        msg="; ".join(messages) if messages else NONE,
        roles=list(app_def.roles) if app_def else list(rebuilt.values()),
        cause=cause,
        submitted=utc_of_ns(min((c.created_ns for c in ordered if c.created_ns), default=None)),
    )


def _stopped_by_restart(container: Container, engine_started_ns: int | None) -> bool:
    finished = container.finished_ns
    if engine_started_ns is None or finished is None or not killed_by_signal(container):
        return False
    return engine_started_ns - SHUTDOWN_WINDOW_NS <= finished <= engine_started_ns
