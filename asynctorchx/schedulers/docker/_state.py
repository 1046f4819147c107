"""Pure decision tables of ``local_docker``: engine records in, replica and app states out.

No I/O here: every function reads records the engine returned (a container's inspect,
a listing entry, an event) and decides. The container state names are the Docker Engine
API's (``created``, ``running``, ``restarting``, ``paused``, ``removing``, ``exited``,
``dead``); their mapping to a replica's :class:`~asynctorchx.specs.api.AppState` is
TorchX 0.7.0's (``torchx.schedulers.docker_scheduler``), with the differences the
scheduler documents (a replica the cancel ended is CANCELLED). From replicas to the app
the rule is every backend's, :func:`~asynctorchx.schedulers.toolkit.app_state` (an app
is terminal only once every replica is).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from asynctorchx.schedulers.api import DescribeAppResponse
from asynctorchx.schedulers.docker._request import (
    LABEL_APP_DEF,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
)
from asynctorchx.schedulers.toolkit import (
    app_state,
    describe_app,
    parse_rfc3339_ns,
    role_statuses,
)
from asynctorchx.specs.api import NONE, AppDef, AppState, ReplicaStatus, Role
from asynctorchx.specs.converter import from_json

#: The engine's container states that are not terminal (TorchX's table in
#: ``torchx.schedulers.docker_scheduler``).
LIVE_STATES: dict[str, AppState] = {
    "created": AppState.SUBMITTED,
    "restarting": AppState.PENDING,
    "running": AppState.RUNNING,
    "paused": AppState.PENDING,
    "removing": AppState.PENDING,
}

#: Container events that may change a replica's state (``wait``, ``wait_for_state_change``).
STATE_EVENTS = ("create", "start", "die", "stop", "destroy", "pause", "unpause")
#: Container events after which a followed log has ended (the process is gone).
STOP_EVENTS = frozenset({"die", "stop", "destroy"})

#: The exit code in a container listing's ``Status`` text (``docker ps``'s STATUS column).
_EXITED = re.compile(r"Exited \((-?\d+)\)")


# --------------------------------------------------------------------------- times


def engine_time(when: datetime) -> str:
    """Format ``when`` as the engine's ``since``/``until`` (seconds.nanoseconds since epoch).

    Args:
        when: the time; a naive ``datetime`` is local time (``datetime.timestamp``'s
            convention), kept to the microsecond.
    """
    ns = round(when.timestamp() * 1_000_000) * 1000
    return ns_to_engine(ns)


def ns_to_engine(ns: int) -> str:
    """Format ``ns`` since the epoch as the engine's ``since``/``until`` parameter.

    Args:
        ns: nanoseconds since the epoch.
    """
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


# --------------------------------------------------------------------------- events


def event_id(event: Mapping[str, Any]) -> str:
    """The id of the object an engine event is about (``Actor.ID``).

    Args:
        event: one record of the engine's ``GET /events`` stream.
    """
    actor = event.get("Actor") or {}
    return str(actor.get("ID") or event.get("id") or "")


def event_action(event: Mapping[str, Any]) -> str:
    """The action of an engine event (``die``, ``start``...), without a ``: detail`` suffix.

    Args:
        event: one record of the engine's ``GET /events`` stream.
    """
    action = str(event.get("Action") or event.get("status") or "")
    return action.split(":", 1)[0]


# --------------------------------------------------------------------------- states


def replica_state(
    state: Mapping[str, Any], cancelled_at_ns: int | None
) -> tuple[AppState, int | None]:
    """Map a container's ``State`` (its inspect) to a replica state and exit code.

    ``exited`` with 0 is SUCCEEDED; another exit, ``dead``, or ``created`` with an
    ``Error`` (the engine could not start it) is FAILED; a container that finished at or
    after the app's cancel (or has no finish time) is CANCELLED. A container never
    started (``created``) of a cancelled app is CANCELLED too: nothing will start it any
    more, and the app must still end. Live states follow :data:`LIVE_STATES`.

    Args:
        state: the ``State`` object of the container's inspect.
        cancelled_at_ns: when the app was cancelled (ns since the epoch), or ``None``.

    Returns:
        the replica's state, and its exit code once finished (``None`` while live).
    """
    status = state.get("Status", "")
    exit_code = state.get("ExitCode")
    if status == "created" and cancelled_at_ns is not None and not state.get("Error"):
        return AppState.CANCELLED, None
    finished = status in ("exited", "dead") or (status == "created" and bool(state.get("Error")))
    if not finished:
        return LIVE_STATES.get(status, AppState.UNKNOWN), None
    finished_ns = parse_rfc3339_ns(state.get("FinishedAt"))
    if cancelled_at_ns is not None and (finished_ns is None or finished_ns >= cancelled_at_ns):
        return AppState.CANCELLED, exit_code
    if status == "exited" and exit_code == 0:
        return AppState.SUCCEEDED, 0
    return AppState.FAILED, exit_code


def listed_state(container: Mapping[str, Any]) -> AppState:
    """A replica's state from its container listing entry (no inspect, no cancel marker).

    Args:
        container: one entry of ``GET /containers/json`` (``State`` and ``Status``).
    """
    status = container.get("State", "")
    if status in ("exited", "dead"):
        match = _EXITED.search(container.get("Status", ""))
        code = int(match.group(1)) if match else None
        return AppState.SUCCEEDED if code == 0 else AppState.FAILED
    return LIVE_STATES.get(status, AppState.UNKNOWN)


# --------------------------------------------------------------------------- describe


def replica_of(labels: Mapping[str, str]) -> tuple[str, int]:
    """The role and replica id of a container, from its labels (TorchX's).

    Args:
        labels: a container's labels (its listing entry's or its inspect's).
    """
    return labels.get(LABEL_ROLE_NAME, ""), int(labels.get(LABEL_REPLICA_ID, "0"))


def _replica_key(info: Mapping[str, Any]) -> tuple[str, int]:
    return replica_of(info["Config"]["Labels"])


def _submitted_app(labels: Mapping[str, str]) -> AppDef | None:
    """The ``AppDef`` the app was submitted with (its label), if it has a readable one."""
    if LABEL_APP_DEF not in labels:
        return None
    try:
        return from_json(labels[LABEL_APP_DEF], AppDef)
    except Exception:
        return None


def _failure(role: str, replica_id: int, exit_code: int | None, state: Mapping[str, Any]) -> str:
    """The message part of a failed replica: its exit code and the engine's error."""
    error = state.get("Error") or ""
    message = f"{role}/{replica_id} failed with exit code {exit_code}"
    return f"{message}: {error}" if error else message


def describe_from(
    app_id: str, inspected: list[dict[str, Any]], cancelled_at_ns: int | None
) -> DescribeAppResponse:
    """Describe the app from its containers' inspects and its cancel time.

    Each replica's state is :func:`replica_state`'s; the app's state and the response
    follow the rule every backend shares (:func:`~asynctorchx.schedulers.toolkit.app_state`
    through :func:`~asynctorchx.schedulers.toolkit.describe_app`). ``num_restarts`` sums
    the containers' ``RestartCount``; ``msg`` names each failed replica with its exit
    code and the engine's error, after ``cancelled`` for a cancelled app (``<NONE>`` when
    there is nothing to say). ``roles_statuses`` holds the roles that have containers, in
    the submitted ``AppDef``'s order (the ``asynctorchx.pytorch.org/app-def`` label), and
    ``roles`` is that ``AppDef``'s, or rebuilt from the containers' labels for apps
    TorchX started.

    Args:
        app_id: the app.
        inspected: the inspect of each of its containers.
        cancelled_at_ns: when the app was cancelled (ns since the epoch), or ``None``.
    """
    rebuilt: dict[str, Role] = {}
    replicas: list[ReplicaStatus] = []
    restarts = 0
    failures: list[str] = []
    app_def: AppDef | None = None
    for info in sorted(inspected, key=_replica_key):
        role, replica_id = _replica_key(info)
        if app_def is None:
            app_def = _submitted_app(info["Config"]["Labels"])
        if role not in rebuilt:
            rebuilt[role] = Role(name=role, image=info["Config"]["Image"], num_replicas=0)
        rebuilt[role].num_replicas += 1
        state, exit_code = replica_state(info["State"], cancelled_at_ns)
        restarts += int(info.get("RestartCount", 0))
        if state == AppState.FAILED:
            failures.append(_failure(role, replica_id, exit_code, info["State"]))
        name = str(info.get("Name", "")).lstrip("/")
        replicas.append(
            ReplicaStatus(
                id=replica_id,
                state=state,
                role=role,
                hostname=str(info["Config"].get("Hostname") or name),
                exit_code=exit_code,
            )
        )
    cancelled = cancelled_at_ns is not None
    state_of_app = app_state((replica.state for replica in replicas), cancelled=cancelled)
    messages = (["cancelled"] if state_of_app == AppState.CANCELLED else []) + failures
    submitted = [role.name for role in app_def.roles] if app_def else []
    return describe_app(
        app_id,
        role_statuses(replicas, [name for name in submitted if name in rebuilt]),
        cancelled=cancelled,
        num_restarts=restarts,
        msg="; ".join(messages) if messages else NONE,
        roles=list(app_def.roles) if app_def else list(rebuilt.values()),
    )
