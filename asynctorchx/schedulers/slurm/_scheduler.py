"""``SlurmScheduler``: an app is one heterogeneous ``sbatch`` job, watched with ``squeue``.

TorchX's ``torchx.schedulers.slurm_scheduler.SlurmScheduler`` made awaitable, with these
differences:

- state comes from ``squeue -h -t all`` (works without accounting) and from ``sacct -P``
  only for jobs ``squeue`` no longer lists, when the cluster has accounting; TorchX reads
  only ``sacct`` and fails on clusters without it;
- a job that left ``squeue`` with no accounting record keeps the state this scheduler last
  saw (never a guessed ``SUCCEEDED``);
- ``wait``/``wait_for_state_change`` use the base class's batched poller: Slurm pushes no
  job event to ordinary users, so every watched job is asked for in ONE ``squeue`` call
  per tick (see ``docs/slurm.md``).

``srun`` writes each replica's stdout and stderr to ``slurm-{job_id}-{role}-{replica}.out``
and ``.err`` in the job's directory (``--chdir``, the ``job_dir`` run option, else the
directory ``sbatch`` ran in), as TorchX lays them out. TorchX finds a ``job_dir`` through
the file ``.torchxslurmjobdirs`` in the current directory (``{job_id} = {job_dir}``
lines); this module writes and reads the same file so either tool finds the other's logs.
The files are followed with :func:`~asynctorchx.schedulers.toolkit.tail_blocks`, read off
the event loop (on a shared filesystem, NFS or Lustre, a read can block) and woken at each
tick of the batched ``squeue`` poller, as Slurm pushes nothing when a file grows.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import tempfile
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

import anyio

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
    SlurmBatchRequest,
    SlurmOpts,
    SlurmVersion,
    build_batch_request,
)
from asynctorchx.schedulers.slurm._state import (
    SlurmComponent,
    describe_job,
    job_state,
    sacct_start,
)
from asynctorchx.schedulers.toolkit import LogBlock, LogPosition, LogQuery, tail_blocks
from asynctorchx.specs.api import AppDef, AppDryRunInfo, CfgVal, Role, is_terminal
from asynctorchx.workspace.dir_workspace import DirWorkspaceMixin

logger = logging.getLogger(__name__)

#: The default seconds between two ``squeue`` polls while watched jobs change.
DEFAULT_POLL_INTERVAL = 1.0

#: TorchX's file of job directories, in the current directory
#: (``torchx.schedulers.slurm_scheduler.SLURM_JOB_DIRS``).
JOB_DIRS_FILE = ".torchxslurmjobdirs"

#: What ``describe``'s ``msg`` says of a job ``squeue`` (and ``sacct``) no longer lists.
LAST_SEEN = "squeue no longer lists this job and there is no accounting record: last seen {}"


class SlurmScheduler(DirWorkspaceMixin, Scheduler[SlurmBatchRequest]):
    """Runs each app as one Slurm heterogeneous job (one component per role replica).

    As TorchX's, a workspace is copied into ``job_dir``, where the job runs
    (:class:`~asynctorchx.workspace.dir_workspace.DirWorkspaceMixin`).

    Args:
        session_name: the runner session (part of app handles).
        poll_interval: seconds between two ``squeue`` calls of :meth:`wait` while
            watched jobs change (default :data:`DEFAULT_POLL_INTERVAL`, 1 s); the tick
            doubles after 60 s without change, up to 10 s (the base class's
            :class:`~asynctorchx.schedulers.toolkit.BatchedPoller`).
        commands: runs Slurm's commands (default: a new :class:`SlurmCommands`); its
            ``counts`` tell how many times each command ran.

    Raises:
        ValueError: ``poll_interval`` is not a positive number of seconds.

    Job ids are the app ids (``sbatch --parsable``'s output, the leader's id for a
    heterogeneous job). The scheduler keeps, per job it saw, the last components it saw
    and (for jobs it submitted) the roles and directory; :meth:`delete` forgets them.
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
        self._accounting: bool | None = None  # unknown until sacct answers
        self._partition_memory: dict[str | None, int | None] = {}
        #: The cluster's release, asked once on entering (``None``: not entered, or unknown).
        self.slurm_version: SlurmVersion | None = None

    async def __aenter__(self) -> SlurmScheduler:
        """Ask ``sinfo --version`` once: the release picks the GPU options of every request."""
        self.slurm_version = await self.commands.version()
        return self

    def _submit_dryrun(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> AppDryRunInfo[SlurmBatchRequest]:
        return AppDryRunInfo(build_batch_request(app, cfg, self.slurm_version), repr)

    async def schedule(self, dryrun_info: AppDryRunInfo[SlurmBatchRequest]) -> str:
        """Write the batch script and submit it with ``sbatch --parsable``; return the job id.

        With ``job_dir`` the script is written there (the directory is created if
        missing), the job runs there (``--chdir``) and ``{job_id} = {job_dir}`` is appended
        to ``.torchxslurmjobdirs`` in the current directory, as TorchX does. Without it the
        script goes to a temporary directory and the job runs in the current directory.
        When the partition declares at most 1000 MB per node (``sinfo``), ``--mem`` is
        left out, as ``torchx.schedulers.slurm_scheduler`` does.

        Args:
            dryrun_info: what :meth:`submit_dryrun` returned.

        Returns:
            The job id.

        Raises:
            SlurmNotInstalledError: ``sbatch`` is not on ``PATH``.
            SlurmSubmitError: Slurm refused an option (unknown partition...); it names it.
            SlurmCommandError: sbatch failed otherwise.
            OSError: the script or the job directory cannot be written.
        """
        request = dryrun_info.request
        await self._drop_memory_if_undeclared(request)
        job_dir = str(await anyio.Path(request.job_dir).absolute()) if request.job_dir else None
        script = request.materialize()
        with tempfile.TemporaryDirectory(prefix="asynctorchx-slurm-") as temporary:
            path = anyio.Path(job_dir or temporary, "torchx-sbatch.sh")
            await path.parent.mkdir(parents=True, exist_ok=True)
            await path.write_text(script)
            argv = list(request.cmd)
            if job_dir is not None:
                argv.append(f"--chdir={job_dir}")
            argv.append(str(path))
            options = {
                name: value
                for replica in request.replicas.values()
                for name, value in replica.sbatch_opts.items()
                if value is not None
            }
            job_id = await self.commands.sbatch(argv, options=options)
        if job_id in self._last_seen:  # an id reused after a controller restart
            await self._remove(job_id)
        self._job_dirs[job_id] = job_dir or os.getcwd()
        if job_dir is not None:  # as TorchX does, so its log_iter finds the logs
            async with await anyio.open_file(JOB_DIRS_FILE, "a") as file:
                await file.write(f"{job_id} = {job_dir}\n")
        if dryrun_info._app is not None:
            self._roles[job_id] = list(dryrun_info._app.roles)
        return job_id

    async def _drop_memory_if_undeclared(self, request: SlurmBatchRequest) -> None:
        """Leave out ``--mem`` on a partition that declares too little memory per node."""
        if not any("mem" in replica.sbatch_opts for replica in request.replicas.values()):
            return
        partitions = {replica.sbatch_opts.get("partition") for replica in request.replicas.values()}
        name = next(iter(partitions)) if len(partitions) == 1 else None
        if name not in self._partition_memory:
            self._partition_memory[name] = await self.commands.partition_memory_mb(name)
        request.drop_memory(self._partition_memory[name])

    async def describe(self, app_id: str) -> DescribeAppResponse | None:
        """Describe the job: app, role and replica states, nodes and exit codes.

        One ``squeue -h -t all`` call (states, exit codes and restarts); ``sacct`` when
        squeue no longer lists the job and the cluster has accounting. A job neither
        lists is described by its last seen state, with a ``msg`` saying so; one this
        scheduler never saw is unknown.

        Args:
            app_id: the job id.

        Returns:
            The description, or ``None`` for a job Slurm and this scheduler do not know.

        Raises:
            SlurmNotInstalledError: Slurm's commands are not on ``PATH``.
            SlurmCommandError: squeue failed (no controller answers).
        """
        return (await self._describe_many([app_id])).get(app_id)

    async def _describe_many(self, app_ids: Collection[str]) -> dict[str, DescribeAppResponse]:
        """Describe every job of ``app_ids`` with ONE ``squeue`` call (the poller's tick).

        Args:
            app_ids: job ids; ids that are not Slurm job ids are unknown.
        """
        job_ids = [app_id for app_id in dict.fromkeys(app_ids) if app_id.isdigit()]
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
            response = describe_job(job_id, self._last_seen[job_id], self._roles.get(job_id, ()))
            if job_id not in listed:
                response.msg = LAST_SEEN.format(response.msg)
            responses[job_id] = response
        return responses

    async def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """List the current user's jobs: what ``squeue`` shows, and accounting's history.

        ``squeue --me -t all`` gives every pending or running job and those that ended
        less than ``MinJobAge`` ago; with accounting, one ``sacct`` call adds the jobs
        that ended since ``history`` ago (run option, default ``1days``), with their
        final states. squeue's state wins for a job both list. (TorchX lists only
        ``sacct --json``'s records, from 1970 on, which needs accounting.)

        Args:
            cfg: run options; only ``history`` is read (``0``: squeue only).

        Returns:
            The jobs by ascending job id.

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
        return [
            ListAppResponse(app_id=job_id, state=job_state(jobs[job_id]))
            for job_id in sorted(jobs, key=int)
        ]

    async def _cancel_existing(self, app_id: str) -> None:
        """Cancel the job with ``scancel``: every component, processes included. Slurm
        reports ``CANCELLED`` once every process is gone (what ``wait`` awaits)."""
        await self.commands.scancel(app_id)

    async def _remove(self, app_id: str) -> None:
        """Forget what this scheduler kept of the job (``delete``); Slurm keeps its own."""
        for kept in (self._last_seen, self._roles, self._job_dirs):
            kept.pop(app_id, None)

    def _log_blocks(
        self, app_id: str, query: LogQuery, start: LogPosition
    ) -> AsyncIterator[LogBlock]:
        """Read a replica's ``slurm-{job_id}-{role}-{k}.out`` or ``.err`` file.

        ``streams``: ``STDOUT`` reads ``.out``, ``STDERR`` and ``None`` read ``.err``
        (TorchX's default). ``since``/``until`` are ignored (a warning is logged): the
        files have no time per line, as in TorchX. ``should_tail`` follows the file until
        the job is terminal, woken at each ``squeue`` tick of the batched poller. A
        block's position is the byte offset of its first line in the file.

        Args:
            app_id: the job id.
            query: the replica, filters and follow mode.
            start: the byte offset to read from (0 or a block's position).

        Raises:
            ValueError: ``streams`` is ``COMBINED`` (here, before any I/O), or the app has
                no such role or replica (when iterated).
            UnknownAppException: the job is unknown (when iterated).
        """
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
    """The name of a replica's log file: ``slurm-{app_id}-{role}-{k}.out`` or ``.err``.

    Args:
        app_id: the job id.
        role_name: the role.
        k: the replica id.
        stream: ``Stream.STDOUT`` (``.out``) or ``Stream.STDERR`` (``.err``).

    Raises:
        ValueError: ``stream`` is ``COMBINED``: Slurm writes the two streams to two files
            and keeps no order between them (TorchX refuses it too).
    """
    if stream == Stream.COMBINED:
        raise ValueError(
            "the slurm scheduler cannot read a COMBINED log stream: srun writes stdout and"
            " stderr to separate files; use streams=Stream.STDOUT or Stream.STDERR"
        )
    extension = "out" if stream == Stream.STDOUT else "err"
    return f"slurm-{app_id}-{role_name}-{k}.{extension}"


async def _read_job_dirs() -> dict[str, str]:
    """Read :data:`JOB_DIRS_FILE` of the current directory: job id -> job directory.

    Returns:
        The mapping (later lines win); empty when the file does not exist or cannot be
        read. Never raises.
    """
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
        kwargs: ``poll_interval`` (seconds, a number or its text, e.g. from
            ``TORCHX_POLL_INTERVAL``); other keys (the Runner passes every ``TORCHX_*``
            environment variable) are ignored, as TorchX's factory ignores them.

    Raises:
        ValueError: ``poll_interval`` is not a positive number of seconds.
    """
    poll_interval = kwargs.get("poll_interval", DEFAULT_POLL_INTERVAL)
    return SlurmScheduler(session_name, poll_interval=poll_interval)
