"""Slurm's job states and the text of ``squeue`` and ``sacct``, pure: an app is one job or
one job array element (``38_2``), a heterogeneous job's components (``38+0``, ``38+1``) its
replicas, each named ``{role}-{replica_id}``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

import attrs

from asynctorchx.errors import InvalidRunConfigException
from asynctorchx.schedulers._responses import DescribeAppResponse, ListAppResponse
from asynctorchx.schedulers.toolkit import app_state, describe_app, role_statuses
from asynctorchx.specs.api import AppState, EndCause, ReplicaStatus, Role, is_started, is_terminal

#: ASCII unit separator: job names and directories may hold ``|`` or spaces, never this.
FIELD_SEPARATOR = "\x1f"

#: ``squeue -O`` fields, each printed whole (width 0); ``exit_code`` is a wait status.
SQUEUE_FIELDS = (
    "JobArrayID,State,NodeList,Reason,Name,WorkDir,exit_code,restartcnt,SubmitTime,EndTime,"
    "StartTime"
)
SQUEUE_FORMAT = f"{FIELD_SEPARATOR},".join(f"{field}:0" for field in SQUEUE_FIELDS.split(","))

SACCT_FIELDS = "JobID,State,NodeList,Reason,JobName,WorkDir,ExitCode,Submit,End,Start"

#: Slurm job state (squeue(1) "JOB STATE CODES") -> AppState: TorchX's ``SLURM_STATES`` and
#: the states it lacks; ``COMPLETING`` is RUNNING so that a terminal state means no process
#: is left. States missing here are ``UNKNOWN``.
SLURM_STATES: Mapping[str, AppState] = {
    "BOOT_FAIL": AppState.FAILED,
    "CANCELLED": AppState.CANCELLED,
    "COMPLETED": AppState.SUCCEEDED,
    "COMPLETING": AppState.RUNNING,
    "CONFIGURING": AppState.PENDING,
    "DEADLINE": AppState.FAILED,
    "FAILED": AppState.FAILED,
    "NODE_FAIL": AppState.FAILED,
    "OUT_OF_MEMORY": AppState.FAILED,
    "PENDING": AppState.PENDING,
    "PREEMPTED": AppState.FAILED,
    "REQUEUED": AppState.PENDING,
    "REQUEUE_FED": AppState.PENDING,
    "REQUEUE_HOLD": AppState.PENDING,
    "RESIZING": AppState.PENDING,
    "RESV_DEL_HOLD": AppState.PENDING,
    "REVOKED": AppState.FAILED,
    "RUNNING": AppState.RUNNING,
    "SIGNALING": AppState.RUNNING,
    "SPECIAL_EXIT": AppState.FAILED,
    "STAGE_OUT": AppState.RUNNING,
    "STOPPED": AppState.PENDING,
    "SUSPENDED": AppState.PENDING,
    "TIMEOUT": AppState.FAILED,
}

#: Slurm's end states -> why the job ended (squeue(1) "JOB STATE CODES"); one missing: not said.
SLURM_END_CAUSES: Mapping[str, EndCause] = {
    "BOOT_FAIL": EndCause.NODE_LOST,
    "CANCELLED": EndCause.CANCELLED,
    "COMPLETED": EndCause.EXITED,
    "DEADLINE": EndCause.TIMED_OUT,
    "FAILED": EndCause.EXITED,
    "NODE_FAIL": EndCause.NODE_LOST,
    "OUT_OF_MEMORY": EndCause.OUT_OF_MEMORY,
    "PREEMPTED": EndCause.PREEMPTED,
    "TIMEOUT": EndCause.TIMED_OUT,
}

_Time = datetime | None

#: An app's id: a job's (``12``) or a job array element's (``12_3``).
APP_ID = re.compile(r"\d+(?:_\d+)?")
_JOB_ID = re.compile(rf"({APP_ID.pattern})(?:\+(\d+))?")  # and a component's (12+1)
_BATCH_STEP = re.compile(r"(\d+(?:_\d+)?)(?:\+0)?\.batch")
_HISTORY = re.compile(r"(\d+)(seconds|minutes|hours|days|weeks)?")


@attrs.frozen
class SlurmComponent:
    """One Slurm job, or one component of a heterogeneous job: one replica of an app.

    Args:
        app_id: the job id of the app (the heterogeneous job's leader).
        offset: the component's offset; ``None`` for a plain job.
        state: Slurm's state name.
        nodes: the nodes it runs on; empty while pending.
        reason: why it is in that state.
        name: its job name, ``{role}-{replica_id}`` for a component we submitted.
        work_dir: the directory it runs in, where its log files are.
        exit_code: its exit code once it ended, else ``None``.
        restarts: how often Slurm requeued it; ``None``: not known.
        submitted: when it was submitted; ``None``: not known.
        ended: when it ended, else ``None`` (squeue's end of a running job is a forecast).
        started: when it started on its nodes, else ``None`` (a pending job's is a forecast).
    """

    app_id: str
    offset: int | None
    state: str
    nodes: str = ""
    reason: str = ""
    name: str = ""
    work_dir: str = ""
    exit_code: int | None = None
    restarts: int | None = None
    submitted: datetime | None = None
    ended: datetime | None = None
    started: datetime | None = None

    @property
    def app_state(self) -> AppState:
        return slurm_state(self.state)

    @property
    def replica(self) -> tuple[str, int]:
        """``(role, replica_id)`` from the name; a job we did not submit is role ``{name}``."""
        role, _, replica_id = self.name.rpartition("-")
        if role and replica_id.isdigit():
            return role, int(replica_id)
        return self.name, self.offset or 0


def slurm_state(state: str) -> AppState:
    """The :class:`AppState` of a Slurm state as squeue or sacct print it (``CANCELLED by 0``,
    a trailing ``+``); ``UNKNOWN`` for one :data:`SLURM_STATES` lacks."""
    return SLURM_STATES.get(_state_name(state), AppState.UNKNOWN)


def _state_name(state: str) -> str:
    return state.split(" ", 1)[0].rstrip("+").upper()


def _end_cause(components: Sequence[SlurmComponent], state: AppState) -> EndCause | None:
    """The cause of the first component whose state is the job's (the one that decided it)."""
    deciding = [component for component in components if component.app_state == state]
    return SLURM_END_CAUSES.get(_state_name((deciding or components)[0].state))


def _split_job_id(job_id: str) -> tuple[str, int | None] | None:
    match = _JOB_ID.fullmatch(job_id)
    if match is None:
        return None  # a step (12.batch), an array's pending elements (12_[0-9]): no app
    offset = match.group(2)
    return match.group(1), int(offset) if offset is not None else None


def _group(components: Iterable[SlurmComponent]) -> dict[str, list[SlurmComponent]]:
    grouped: dict[str, list[SlurmComponent]] = {}
    for component in components:
        grouped.setdefault(component.app_id, []).append(component)
    for listed in grouped.values():
        listed.sort(key=lambda component: component.offset or 0)
    return grouped


def parse_squeue(text: str) -> dict[str, list[SlurmComponent]]:
    """App id -> its components of ``squeue -h -O`` :data:`SQUEUE_FORMAT`'s output; other
    lines (an array's pending elements on one line: ask ``squeue -r``, malformed) are skipped."""
    components: list[SlurmComponent] = []
    for line in text.splitlines():
        fields = line.split(FIELD_SEPARATOR)
        if len(fields) != 11:
            continue
        job_id, state, nodes, reason, name, work_dir, status, restarts, *times = fields
        ids = _split_job_id(job_id.strip())
        if ids is None:
            continue
        status = status.strip()  # a wait status: 768 exited 3, 15 was killed by SIGTERM
        exit_code = None
        if is_terminal(slurm_state(state)) and status.isdigit():
            exit_code = parse_exit_code(f"{int(status) >> 8}:{int(status) & 0x7F}")
        count = int(restarts) if restarts.strip().isdigit() else None
        at = _times(state, nodes, *times)
        components.append(
            SlurmComponent(
                *ids, state.strip(), nodes, reason, name, work_dir, exit_code, count, *at
            )
        )
    return _group(components)


def _times(state: str, nodes: str, submit: str, end: str, start: str) -> tuple[_Time, _Time, _Time]:
    """Submit, end and start time of a component (its end once it ended, its start once it
    ran on nodes: one cancelled while pending has none)."""
    ended = is_terminal(slurm_state(state))
    ran = is_started(slurm_state(state)) and bool(nodes.strip())
    return (
        _slurm_time(submit),
        _slurm_time(end) if ended else None,
        _slurm_time(start) if ran else None,
    )


def _slurm_time(text: str) -> datetime | None:
    """A Slurm time (``2024-05-01T12:00:00``, this host's local time, as Slurm prints it to a
    client of the same ``TZ``) in UTC; ``None`` for ``Unknown``, ``None``, ``N/A`` or others."""
    try:
        return datetime.fromisoformat(text.strip()).astimezone(UTC)
    except ValueError:
        return None


def job_order(app_id: str) -> tuple[int, ...]:
    """Orders app ids as Slurm numbers jobs: ``9`` before ``10``, ``10_2`` before ``10_10``."""
    return tuple(int(number) for number in app_id.split("_"))


def list_job(app_id: str, components: Sequence[SlurmComponent]) -> ListAppResponse:
    """``list``'s line of a job: its state, its first component's name and submit time, and
    its last end once every component ended."""
    state, first = job_state(components), components[0]
    ends = [component.ended for component in components if component.ended is not None]
    ended = max(ends) if is_terminal(state) and len(ends) == len(components) else None
    return ListAppResponse(app_id, state, name=first.name, submitted=first.submitted, ended=ended)


def parse_exit_code(text: str) -> int | None:
    """One exit code of Slurm's ``code:signal``: ``128 + signal`` when a signal ended it
    (the shell's rule); ``None`` for other text."""
    code, _, signal = text.partition(":")
    if not (code.isdigit() and signal.isdigit()):
        return None
    return 128 + int(signal) if int(signal) else int(code)


def parse_sacct(text: str) -> dict[str, list[SlurmComponent]]:
    """App id -> its components of ``sacct -P -n -D`` output: the last run of each, the
    runs before it its restarts, the ``.batch`` step's exit code as squeue gives it (the
    job's own is ``0:0`` when cancelled); other steps and lines are skipped."""
    last: dict[tuple[str, int | None], SlurmComponent] = {}
    runs: dict[tuple[str, int | None], int] = {}
    batch: dict[str, int | None] = {}
    for line in text.splitlines():
        fields = line.split(FIELD_SEPARATOR)
        if len(fields) != 10:
            continue
        job_id, state, nodes, reason, name, work_dir, exit_code, *times = fields
        step = _BATCH_STEP.fullmatch(job_id.strip())
        if step is not None:
            code = parse_exit_code(exit_code)
            if code is not None:  # empty when Slurm cancelled the step of a failed run
                batch[step.group(1)] = code
            continue
        ids = _split_job_id(job_id.strip())
        if ids is None:
            continue
        if ids[1] in (None, 0):
            batch.pop(ids[0], None)  # a new run: the batch step of the one before is stale
        runs[ids] = runs.get(ids, 0) + 1
        nodes = "" if nodes == "None assigned" else nodes
        state = state.split(" ", 1)[0]
        code = parse_exit_code(exit_code)
        at = _times(state, nodes, *times)
        last[ids] = SlurmComponent(*ids, state, nodes, reason, name, work_dir, code, None, *at)
    return _group(
        attrs.evolve(
            component,
            exit_code=batch.get(component.app_id, component.exit_code)
            if is_terminal(component.app_state)
            else None,  # a run not over yet has no exit code (sacct prints 0:0)
            restarts=runs[key] - 1,
        )
        for key, component in last.items()
    )


def sacct_start(history: str) -> str | None:
    """``now-{history}`` (``7days``), ``None`` for a zero count; raises
    ``InvalidRunConfigException`` unless it is a count and an optional sacct(1) unit."""
    match = _HISTORY.fullmatch(history.strip())
    if match is None:
        raise InvalidRunConfigException(
            f"run option 'history' is {history!r}: expected a count and an optional unit"
            " (seconds, minutes, hours, days, weeks), e.g. `-cfg history=7days`;"
            " 0 lists only the jobs squeue shows",
            "history",
        )
    return f"now-{history.strip()}" if int(match.group(1)) else None


def job_state(components: Sequence[SlurmComponent]) -> AppState:
    """The toolkit's ``app_state``, except that once all ended a ``FAILED`` component makes
    the app ``FAILED``: ``srun --kill-on-bad-exit`` cancels the others because of it."""
    states = [component.app_state for component in components]
    if states and all(is_terminal(state) for state in states) and AppState.FAILED in states:
        return AppState.FAILED
    return app_state(states)


def _pending_reason(component: SlurmComponent) -> str | None:
    """Slurm's ``Reason`` of a pending component (``Priority``, ``BeginTime``), else ``None``."""
    reason = component.reason.strip()
    pending = component.app_state == AppState.PENDING
    return reason if pending and reason not in ("", "None") else None


def _message(components: Sequence[SlurmComponent]) -> str:
    """``RUNNING``, or ``FAILED (NonZeroExitCode)``: Slurm's words for the first component."""
    first = components[0]
    reason = first.reason.strip()
    return f"{first.state} ({reason})" if reason and reason != "None" else first.state


def describe_job(
    app_id: str, components: Sequence[SlurmComponent], roles: Sequence[Role] = ()
) -> DescribeAppResponse:
    """The description of a job from its components (at least one): each the replica its
    name gives; ``msg`` the first one's state and reason; ``num_restarts`` the most of a
    component (``-1``: unknown); without ``roles``, roles rebuilt from the names, as TorchX."""
    replicas: list[ReplicaStatus] = []
    counts: dict[str, int] = {}
    for component in components:
        role, replica_id = component.replica
        counts[role] = counts.get(role, 0) + 1
        replicas.append(
            ReplicaStatus(
                id=replica_id,
                state=component.app_state,
                role=role,
                hostname=component.nodes,
                exit_code=component.exit_code,
                started=component.started,
                ended=component.ended,
            )
        )
    if not roles:
        roles = [Role(name=name, image="", num_replicas=count) for name, count in counts.items()]
    restarts = [component.restarts for component in components if component.restarts is not None]
    state = job_state(components)
    return describe_app(
        app_id,
        role_statuses(replicas, [role.name for role in roles]),
        num_restarts=max(restarts, default=-1),
        msg=_message(components),
        roles=roles,
        state=state,
        cause=_end_cause(components, state),
        pending_reason=next(
            (
                c.reason
                for c in components
                if c.app_state == AppState.PENDING and c.reason != "None"
            ),
            None,
        ),
        submitted=min((c.submitted for c in components if c.submitted), default=None),
    )
