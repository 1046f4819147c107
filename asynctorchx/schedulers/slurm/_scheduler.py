"""``SlurmScheduler``: an app is one heterogeneous ``sbatch`` job, watched with ``squeue``.

TorchX's ``SlurmScheduler`` made awaitable, except that state comes from ``squeue`` (no
accounting needed), ``sacct`` only for jobs squeue no longer lists, and a job neither lists
keeps its last seen state, never a guessed ``SUCCEEDED`` (``docs/slurm.md``). Log files
are TorchX's, found through its ``.torchxslurmjobdirs``, read off the loop (NFS can block).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import tempfile
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread
import attrs

from asynctorchx.errors import UnknownAppException
from asynctorchx.schedulers.api import (
    Capabilities,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
)
from asynctorchx.schedulers.slurm._commands import SlurmCommands
from asynctorchx.schedulers.slurm._request import (
    MAX_ARRAY,
    SlurmBatchRequest,
    SlurmOpts,
    SlurmVersion,
    array_script,
    array_shape,
    build_batch_request,
)
from asynctorchx.schedulers.slurm._state import (
    APP_ID,
    SlurmComponent,
    describe_job,
    job_order,
    job_state,
    list_job,
    sacct_start,
)
from asynctorchx.schedulers.toolkit import (
    TRIAL_LABEL,
    LogBlock,
    LogPosition,
    LogQuery,
    tail_blocks,
)
from asynctorchx.specs.api import AppDef, AppDryRunInfo, CfgVal, Role, is_terminal
from asynctorchx.workspace.dir_workspace import DirWorkspaceMixin

logger = logging.getLogger(__name__)

#: Seconds between two ``squeue`` polls while watched jobs change.
DEFAULT_POLL_INTERVAL = 1.0

#: TorchX's ``SLURM_JOB_DIRS``, in the current directory.
JOB_DIRS_FILE = ".torchxslurmjobdirs"

#: What ``describe``'s ``msg`` says of a job ``squeue`` (and ``sacct``) no longer lists.
LAST_SEEN = "squeue no longer lists this job and there is no accounting record: last seen {}"


class SlurmScheduler(DirWorkspaceMixin, Scheduler[SlurmBatchRequest]):
    """Runs each app as one Slurm heterogeneous job (one component per role replica); a
    workspace is copied into ``job_dir``, as TorchX's. Job ids are the app ids.
    :meth:`schedule_many` submits apps of one replica that differ only in its entrypoint,
    args and env (:func:`array_shape`) as one job array, each element (``{job id}_{index}``)
    an app of its own (``docs/slurm.md``).

    Args:
        session_name: the runner session (part of app handles).
        poll_interval: seconds between two ``squeue`` calls while watched jobs change
            (doubled after 60 s without change, up to 10 s).
        commands: runs Slurm's commands (default: a new :class:`SlurmCommands`).

    Raises:
        ValueError: ``poll_interval`` is not a positive number of seconds.
    """

    capabilities = Capabilities(  # .out and .err; the workspace is copied into job_dir
        opts=SlurmOpts,
        log_streams=frozenset({Stream.STDOUT, Stream.STDERR}),
        workspace="directory",
    )

    def __init__(
        self,
        session_name: str,
        *,
        poll_interval: float | str = DEFAULT_POLL_INTERVAL,
        commands: SlurmCommands | None = None,
    ) -> None:
        super().__init__("slurm", session_name)
        self.poll_interval = float(poll_interval)
        if not (math.isfinite(self.poll_interval) and self.poll_interval > 0):
            raise ValueError(f"poll_interval={poll_interval!r}: use a positive number of seconds")
        self.commands = commands if commands is not None else SlurmCommands()
        self._last_seen: dict[str, list[SlurmComponent]] = {}
        self._roles: dict[str, list[Role]] = {}
        self._job_dirs: dict[str, str] = {}
        self._cancelled: set[str] = set()
        self._accounting: bool | None = None  # unknown until sacct answers
        self._partition_memory: dict[str | None, int | None] = {}
        self._partition_asked = anyio.Lock()  # concurrent first submits ask sinfo once
        self.slurm_version: SlurmVersion | None = None

    async def __aenter__(self) -> SlurmScheduler:
        """Ask ``sinfo --version`` once: the release picks every request's GPU options."""
        self.slurm_version = await self.commands.version()
        return self

    def _submit_dryrun(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> AppDryRunInfo[SlurmBatchRequest]:
        return AppDryRunInfo(build_batch_request(app, cfg, self.slurm_version), repr)

    def _mark(self, dryrun_info: AppDryRunInfo[SlurmBatchRequest], mark: str) -> None:
        """Add ``{TRIAL_LABEL}={mark}`` to every component's ``--comment`` (after the user's,
        comma-separated); apps of several marks are never one job array."""
        for replica in dryrun_info.request.replicas.values():
            comment = replica.sbatch_opts.get("comment")
            word = f"{TRIAL_LABEL}={mark}"
            replica.sbatch_opts["comment"] = f"{comment},{word}" if comment else word

    async def _find_marked(
        self, dryrun_info: AppDryRunInfo[SlurmBatchRequest], mark: str
    ) -> list[str]:
        """The jobs ``squeue`` shows with ``mark`` in their comment (one ``squeue``); a job
        that ended over ``MinJobAge`` ago is no longer shown."""
        return await self.commands.commented(f"{TRIAL_LABEL}={mark}")

    async def schedule(self, dryrun_info: AppDryRunInfo[SlurmBatchRequest]) -> str:
        """Write the batch script (to ``job_dir``, recorded in ``.torchxslurmjobdirs`` as
        TorchX does, else a temporary directory) and submit it; return the job id.

        A full submit limit of the user's QOS or association is waited out, with one warning
        naming the app and the limit (:meth:`SlurmCommands.sbatch`).

        Raises:
            SlurmNotInstalledError: ``sbatch`` is not on ``PATH``.
            SlurmSubmitLimitError: a submit limit refused the job and none of the user's jobs
                can make room (a zero limit).
            SlurmSubmitError: Slurm refused an option (unknown partition...); it names it.
            SlurmCommandError: sbatch failed otherwise.
            OSError: the script or the job directory cannot be written.
        """
        return (await self._schedule_batch([dryrun_info]))[0]

    def _batches(self, dryrun_infos: Sequence[AppDryRunInfo[SlurmBatchRequest]]) -> list[list[int]]:
        """Requests of one :func:`array_shape` in arrays of at most :data:`MAX_ARRAY`."""
        shapes: dict[object, list[int]] = {}
        for index, info in enumerate(dryrun_infos):
            shape = array_shape(info.request)
            shapes.setdefault(index if shape is None else shape, []).append(index)
        return [
            indices[start : start + MAX_ARRAY]
            for indices in shapes.values()
            for start in range(0, len(indices), MAX_ARRAY)
        ]

    async def _schedule_batch(
        self, dryrun_infos: Sequence[AppDryRunInfo[SlurmBatchRequest]]
    ) -> list[str]:
        """Submit one request as a job, several of one shape as a job array (``{id}_{i}``)."""
        requests = [info.request for info in dryrun_infos]
        for each in requests:
            await self._drop_memory_if_undeclared(each)
        request = requests[0]
        script = request.materialize() if len(requests) == 1 else array_script(requests)
        # sbatch copies the script when it submits, so each submit gets a file of its own:
        # concurrent submits into one job_dir never run each other's script
        path = await anyio.to_thread.run_sync(_write_script, request.job_dir, script)
        job_dir = os.path.dirname(path) if request.job_dir else None
        argv = [*request.cmd, *([f"--chdir={job_dir}"] if job_dir else []), path]
        options = {
            name: value
            for replica in request.replicas.values()
            for name, value in replica.sbatch_opts.items()
            if value is not None
        }
        app = dryrun_infos[0].app
        try:
            job_id = await self.commands.sbatch(argv, options, None if app is None else app.name)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(os.unlink, path)
            raise
        app_ids = (
            [job_id] if len(requests) == 1 else [f"{job_id}_{i}" for i in range(len(requests))]
        )
        for app_id, info in zip(app_ids, dryrun_infos, strict=True):
            if app_id in self._last_seen:  # an id reused after a controller restart
                await self._remove(app_id)
            self._job_dirs[app_id] = job_dir or os.getcwd()
            if info.app is not None:
                self._roles[app_id] = list(info.app.roles)
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_keep_script, path, job_dir, app_ids)
        return app_ids

    async def _drop_memory_if_undeclared(self, request: SlurmBatchRequest) -> None:
        if not any("mem" in replica.sbatch_opts for replica in request.replicas.values()):
            return
        partitions = {replica.sbatch_opts.get("partition") for replica in request.replicas.values()}
        name = next(iter(partitions)) if len(partitions) == 1 else None
        if name not in self._partition_memory:
            async with self._partition_asked:
                if name not in self._partition_memory:
                    self._partition_memory[name] = await self.commands.partition_memory_mb(name)
        request.drop_memory(self._partition_memory[name])

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the job (one ``squeue``; ``sacct`` when squeue no longer lists it); a job
        neither lists has its last seen state, one never seen is ``None``.

        Raises:
            SlurmNotInstalledError: Slurm's commands are not on ``PATH``.
            SlurmCommandError: squeue failed (no controller answers).
        """
        return (await self._describe_many([app_id])).get(app_id)

    async def _describe_many(self, app_ids: Collection[str]) -> dict[str, DescribeAppResponse]:
        """Describe every job of ``app_ids`` with one ``squeue`` call (the poller's tick)."""
        job_ids = [app_id for app_id in dict.fromkeys(app_ids) if APP_ID.fullmatch(app_id)]
        listed = await self.commands.squeue(job_ids)
        missing = [job_id for job_id in job_ids if job_id not in listed]
        if missing and self._accounting is not False:
            records = await self.commands.sacct(missing)
            self._accounting = records is not None
            listed.update(records or {})
        responses: dict[str, DescribeAppResponse] = {}
        for job_id in job_ids:
            if job_id in listed:
                self._last_seen[job_id] = listed[job_id]
            elif job_id not in self._last_seen:
                continue  # never seen here, and Slurm does not know it
            elif job_id in self._cancelled:  # Slurm drops a pending array element it cancels
                self._last_seen[job_id] = [
                    attrs.evolve(component, state="CANCELLED", reason="")
                    for component in self._last_seen[job_id]
                ]
            response = describe_job(job_id, self._last_seen[job_id], self._roles.get(job_id, ()))
            if job_id not in listed:
                response.msg = LAST_SEEN.format(response.msg)
            responses[job_id] = response
        return responses

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """List the user's jobs by job id: ``squeue``'s, and with accounting those ``sacct``
        has since ``history`` (run option) ago; squeue's state wins.

        Raises:
            InvalidRunConfigException: ``cfg`` has an unknown key or a bad ``history``.
            SlurmNotInstalledError: ``squeue`` is not on ``PATH``.
            SlurmCommandError: squeue or sacct failed.
        """
        history = self.run_opts().resolve(cfg or {}).get("history")
        start = sacct_start(str(history))
        jobs = await self.commands.squeue(None)
        if start is not None and self._accounting is not False:
            past = await self.commands.sacct(None, start)
            self._accounting = past is not None
            for job_id, components in (past or {}).items():
                jobs.setdefault(job_id, components)
        return [list_job(job_id, jobs[job_id]) for job_id in sorted(jobs, key=job_order)]

    async def _cancel_existing(self, app_id: str) -> None:
        await self.commands.scancel(app_id)
        self._cancelled.add(app_id)

    async def _remove(self, app_id: str) -> None:
        for kept in (self._last_seen, self._roles, self._job_dirs):
            kept.pop(app_id, None)
        self._cancelled.discard(app_id)

    def _log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        """A replica's ``.out`` (``STDOUT``) or ``.err`` file (else, TorchX's default), followed
        until the job ends; a block's position is its byte offset. ``since``/``until`` are
        ignored (no time per line). ``COMBINED`` is a ``ValueError``."""
        stream = query.stream_or(Stream.STDERR)
        name = log_file_name(app_id, query.role_name, query.k, stream)
        if query.has_time_bounds:
            logger.warning(
                "slurm log files have no time per line: since/until are ignored for %s", name
            )
        return self._read_log(app_id, query, name, start)

    async def _read_log(
        self, app_id: str, query: LogQuery, name: str, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        response = await self.describe(app_id)
        if response is None:
            raise UnknownAppException(app_id)
        query.check_replica(app_id, {role.name: role.num_replicas for role in response.roles})
        work_dirs = [component.work_dir for component in self._last_seen.get(app_id, [])]
        candidates = [self._job_dirs.get(app_id), (await _read_job_dirs()).get(app_id), *work_dirs]
        directory = next((found for found in candidates if found), os.getcwd())
        blocks = tail_blocks(  # woken at each squeue poll; off the loop (shared filesystems)
            os.path.join(directory, name),
            query,
            start=start,
            wait_for_change=functools.partial(self._poller().next_poll, app_id),
            is_finished=functools.partial(self._seen_terminal, app_id),
            offload_reads=True,
        )
        async with contextlib.aclosing(blocks):  # type: ignore[type-var]
            async for block in blocks:
                yield block

    def _seen_terminal(self, app_id: str) -> bool:
        components = self._last_seen.get(app_id)
        return components is None or is_terminal(job_state(components))


def log_file_name(app_id: str, role_name: str, k: int, stream: Stream) -> str:
    """``slurm-{app_id}-{role}-{k}.out`` or ``.err``; ``COMBINED`` is a ``ValueError``."""
    if stream == Stream.COMBINED:
        raise ValueError(
            "the slurm scheduler cannot read a COMBINED log stream: srun writes stdout and"
            " stderr to separate files; use streams=Stream.STDOUT or Stream.STDERR"
        )
    extension = "out" if stream == Stream.STDOUT else "err"
    return f"slurm-{app_id}-{role_name}-{k}.{extension}"


def _write_script(job_dir: str | None, script: str) -> str:
    """Write ``script`` to a new file of its own in ``job_dir`` (made if missing; ``None``:
    the temporary directory); return its absolute path."""
    directory = None
    if job_dir is not None:
        directory = os.path.abspath(job_dir)
        os.makedirs(directory, exist_ok=True)
    descriptor, path = tempfile.mkstemp(prefix=".torchx-sbatch-", suffix=".sh", dir=directory)
    with os.fdopen(descriptor, "w") as file:
        file.write(script)
    return path


def _keep_script(path: str, job_dir: str | None, app_ids: list[str]) -> None:
    """After a submit, keep the script as TorchX does (the last one as
    ``job_dir/torchx-sbatch.sh``) and record the apps' ``job_dir`` in :data:`JOB_DIRS_FILE`,
    where TorchX's ``log_iter`` looks; without a ``job_dir``, remove it."""
    if job_dir is None:
        os.unlink(path)
        return
    os.replace(path, os.path.join(job_dir, "torchx-sbatch.sh"))
    with open(JOB_DIRS_FILE, "a") as file:
        file.write("".join(f"{app_id} = {job_dir}\n" for app_id in app_ids))


async def _read_job_dirs() -> dict[str, str]:
    try:
        text = await anyio.Path(JOB_DIRS_FILE).read_text()
    except OSError:
        return {}
    job_dirs: dict[str, str] = {}
    for line in text.splitlines():
        job_id, _, job_dir = line.partition("=")
        if job_id.strip() and job_dir.strip():
            job_dirs[job_id.strip()] = job_dir.strip()
    return job_dirs


def create_scheduler(session_name: str, **kwargs: Any) -> SlurmScheduler:
    """Create a :class:`SlurmScheduler` (the registry's factory, as TorchX's).

    Args:
        session_name: the runner session.
        kwargs: ``poll_interval`` (seconds, a number or its text); other keys are ignored.

    Raises:
        ValueError: ``poll_interval`` is not a positive number of seconds.
    """
    poll_interval = kwargs.get("poll_interval", DEFAULT_POLL_INTERVAL)
    return SlurmScheduler(session_name, poll_interval=poll_interval)
