"""Slurm's job states and the text of ``squeue`` and ``sacct``: pure, no I/O.

An app is one Slurm job; a heterogeneous job has one component per replica, each named
``{role}-{replica_id}`` (see :mod:`._request`). ``squeue -h -t all -O ...`` lists every
component of the jobs asked for (``38+0``, ``38+1``: leader id ``+`` offset), with its
exit status and restarts, for ``MinJobAge`` seconds after they end; ``sacct -P -D`` lists
them for as long as the accounting database keeps them. These functions turn that text
into :class:`SlurmComponent` values and those into the ``DescribeAppResponse`` every
backend returns (through the scheduler toolkit's
:func:`~asynctorchx.schedulers.toolkit.role_statuses` and
:func:`~asynctorchx.schedulers.toolkit.describe_app`).

The state table extends ``torchx.schedulers.slurm_scheduler``'s ``SLURM_STATES`` with the
states of squeue(1) ("JOB STATE CODES") that TorchX does not list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import attrs

from asynctorchx.errors import InvalidRunConfigException
from asynctorchx.schedulers._responses import DescribeAppResponse
from asynctorchx.schedulers.toolkit import app_state, describe_app, role_statuses
from asynctorchx.specs.api import AppState, ReplicaStatus, Role, is_terminal

#: Separates the fields of the ``squeue``/``sacct`` lines we ask for (ASCII unit
#: separator): job names and directories may hold ``|`` or spaces, never this.
FIELD_SEPARATOR = "\x1f"

#: ``squeue -O`` fields, in the order :func:`parse_squeue` reads them; in
#: :data:`SQUEUE_FORMAT` each is printed whole (width 0) and followed by
#: :data:`FIELD_SEPARATOR` but the last: the id (``leader+offset`` for a component of a
#: heterogeneous job), state, nodes, reason, name, work dir, the exit status (a wait
#: status, as scontrol's ``ExitCode`` ``code:signal``) and how often Slurm requeued it.
SQUEUE_FIELDS = "JobArrayID,State,NodeList,Reason,Name,WorkDir,exit_code,restartcnt"
SQUEUE_FORMAT = f"{FIELD_SEPARATOR},".join(f"{field}:0" for field in SQUEUE_FIELDS.split(","))

#: ``sacct -o`` fields, in the order :func:`parse_sacct` reads them.
SACCT_FIELDS = "JobID,State,NodeList,Reason,JobName,WorkDir,ExitCode"

#: Slurm job state (squeue(1), sacct(1)) -> AppState. ``COMPLETING`` is RUNNING: Slurm
#: shows it until every process of the job is gone, so a terminal state means no process
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

_JOB_ID = re.compile(r"(\d+)(?:\+(\d+))?")
_BATCH_STEP = re.compile(r"(\d+)(?:\+0)?\.batch")
_HISTORY = re.compile(r"(\d+)(seconds|minutes|hours|days|weeks)?")


@attrs.frozen
class SlurmComponent:
    """One Slurm job, or one component of a heterogeneous job: one replica of an app.

    Args:
        app_id: the job id of the app (the heterogeneous job's leader).
        offset: the component's offset in the heterogeneous job; ``None`` for a plain job.
        state: Slurm's state name (``RUNNING``, ``COMPLETED``...).
        nodes: the nodes it runs on (``n1``, ``n[1-2]``); empty while pending.
        reason: why it is in that state (``None``, ``Resources``, ``NonZeroExitCode``...).
        name: its job name, ``{role}-{replica_id}`` for a component we submitted.
        work_dir: the directory it runs in, where its log files are.
        exit_code: its exit code once it ended, else ``None``.
        restarts: how often Slurm requeued it; ``None``: not known.
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

    @property
    def app_state(self) -> AppState:
        """The :class:`AppState` of :attr:`state` (``UNKNOWN`` for a state not in the table)."""
        return slurm_state(self.state)

    @property
    def replica(self) -> tuple[str, int]:
        """``(role, replica_id)`` from the job name ``{role}-{replica_id}``.

        A job we did not submit (``sbatch --wrap``) is role ``{name}``, replica its offset.
        """
        role, _, replica_id = self.name.rpartition("-")
        if role and replica_id.isdigit():
            return role, int(replica_id)
        return self.name, self.offset or 0


def slurm_state(state: str) -> AppState:
    """Map a Slurm job state to an :class:`AppState`.

    Args:
        state: the state as squeue or sacct print it; sacct's ``CANCELLED by 0`` and a
            trailing ``+`` (squeue's flag marks) are accepted.

    Returns:
        The state from :data:`SLURM_STATES`, ``UNKNOWN`` for one it does not list.
    """
    name = state.split(" ", 1)[0].rstrip("+").upper()
    return SLURM_STATES.get(name, AppState.UNKNOWN)


def _split_job_id(job_id: str) -> tuple[str, int | None] | None:
    match = _JOB_ID.fullmatch(job_id)
    if match is None:
        return None  # a job array task (12_3), a step (12.batch): not an app component
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
    """Parse the output of ``squeue -h -O`` :data:`SQUEUE_FORMAT`.

    Args:
        text: squeue's stdout, one component per line.

    Returns:
        app id -> its components by offset, each with its exit code (once ended) and
        restarts. Lines of job array tasks and lines that do not have the eight fields
        are skipped; never raises.
    """
    components: list[SlurmComponent] = []
    for line in text.splitlines():
        fields = line.split(FIELD_SEPARATOR)
        if len(fields) != 8:
            continue
        job_id, state, nodes, reason, name, work_dir, status, restarts = fields
        ids = _split_job_id(job_id.strip())
        if ids is None:
            continue
        status = status.strip()  # a wait status: 768 exited 3, 15 was killed by SIGTERM
        exit_code = None
        if is_terminal(slurm_state(state)) and status.isdigit():
            exit_code = parse_exit_code(f"{int(status) >> 8}:{int(status) & 0x7F}")
        count = int(restarts) if restarts.strip().isdigit() else None
        components.append(
            SlurmComponent(*ids, state.strip(), nodes, reason, name, work_dir, exit_code, count)
        )
    return _group(components)


def parse_exit_code(text: str) -> int | None:
    """Turn Slurm's ``ExitCode`` (``code:signal``) into one exit code.

    Args:
        text: ``3:0`` (exited with 3), ``0:15`` (killed by signal 15), as sacct and
            scontrol print it.

    Returns:
        The code, or ``128 + signal`` when a signal ended it (the shell's rule, as for
        squeue's wait status in :func:`parse_squeue`);
        ``None`` for text that is not ``code:signal``.
    """
    code, _, signal = text.partition(":")
    if not (code.isdigit() and signal.isdigit()):
        return None
    return 128 + int(signal) if int(signal) else int(code)


def parse_sacct(text: str) -> dict[str, list[SlurmComponent]]:
    """Parse the output of ``sacct -P -n -D -o`` :data:`SACCT_FIELDS`.

    ``-D`` lists every run of a requeued job, oldest first: the last one is the
    component, the ones before it its restarts. Steps are listed after their job; the
    ``.batch`` step carries the batch script's exit code, which is what ``squeue`` gives
    every component of the job (the job's own ``ExitCode`` is ``0:0`` when it was
    cancelled, where the batch step's is ``0:15``).

    Args:
        text: sacct's stdout with :data:`FIELD_SEPARATOR` as ``--delimiter``.

    Returns:
        app id -> its components by offset, with exit codes (once ended) and restarts. Other steps
        (``12.0``, ``12.extern``), array tasks and malformed lines are skipped; never raises.
    """
    last: dict[tuple[str, int | None], SlurmComponent] = {}
    runs: dict[tuple[str, int | None], int] = {}
    batch: dict[str, int | None] = {}
    for line in text.splitlines():
        fields = line.split(FIELD_SEPARATOR)
        if len(fields) != 7:
            continue
        job_id, state, nodes, reason, name, work_dir, exit_code = fields
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
        last[ids] = SlurmComponent(*ids, state, nodes, reason, name, work_dir, code)
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
    """The ``sacct --starttime`` of the ``history`` run option of ``list``.

    Args:
        history: how far back ``list`` reads accounting: a count and a unit of sacct(1)'s
            ``now-`` form (``seconds``, the default, ``minutes``, ``hours``, ``days``,
            ``weeks``), e.g. ``7days``; ``0``: no history, only what squeue shows.

    Returns:
        ``now-7days`` for ``7days``; ``None`` for a zero count.

    Raises:
        InvalidRunConfigException: ``history`` is not a count with an optional unit.
    """
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
    """The app's state from its components' states.

    The toolkit's :func:`~asynctorchx.schedulers.toolkit.app_state`, except that once
    every component ended a ``FAILED`` component makes the app ``FAILED`` even if Slurm
    reports others ``CANCELLED``: ``srun --kill-on-bad-exit`` ends the other replicas
    because one failed.

    Args:
        components: every component of the job.
    """
    states = [component.app_state for component in components]
    if states and all(is_terminal(state) for state in states) and AppState.FAILED in states:
        return AppState.FAILED
    return app_state(states)


def _message(components: Sequence[SlurmComponent]) -> str:
    """``RUNNING``, or ``FAILED (NonZeroExitCode)``: Slurm's words for the first component."""
    first = components[0]
    reason = first.reason.strip()
    return f"{first.state} ({reason})" if reason and reason != "None" else first.state


def describe_job(
    app_id: str, components: Sequence[SlurmComponent], roles: Sequence[Role] = ()
) -> DescribeAppResponse:
    """Build the ``DescribeAppResponse`` of a job from its components.

    Each component is the replica its name gives (see :attr:`SlurmComponent.replica`),
    with the component's nodes as hostname and its exit code. The message is Slurm's
    state and reason of the first component; ``num_restarts`` is the most restarts of a
    component (``-1`` when no component says).

    Args:
        app_id: the job id.
        components: every component of the job (at least one).
        roles: the app's roles as submitted; ``()``: roles rebuilt from the component
            names (name and replica count only, no image), as TorchX does.

    Returns:
        The response; never raises.
    """
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
            )
        )
    if not roles:
        roles = [Role(name=name, image="", num_replicas=count) for name, count in counts.items()]
    restarts = [component.restarts for component in components if component.restarts is not None]
    return describe_app(
        app_id,
        role_statuses(replicas, [role.name for role in roles]),
        num_restarts=max(restarts, default=-1),
        msg=_message(components),
        roles=roles,
        state=job_state(components),
    )
