"""Slurm's client commands, run through anyio, and the one mapping of their failures to errors.

Every command is an argv list given to :func:`anyio.run_process` (never a shell). A
command missing from ``PATH`` is :class:`~asynctorchx.errors.SlurmNotInstalledError`;
``sbatch`` refusing an option (an unknown partition, a bad ``--time``) is
:class:`~asynctorchx.errors.SlurmSubmitError` naming that option and carrying Slurm's
message; any other failure is :class:`~asynctorchx.errors.SlurmCommandError`. No other
module of the Slurm scheduler runs a process.

The commands and their output formats are those of squeue(1), sacct(1),
sbatch(1) and scancel(1) of Slurm 22.05, which ``torchx.schedulers.slurm_scheduler`` also
uses (TorchX reads ``sacct``, which fails on clusters without accounting; here ``squeue``
is the source and ``sacct`` a fallback).
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
from collections.abc import Collection, Mapping, Sequence

import anyio

from asynctorchx.errors import (
    SlurmCommandError,
    SlurmNotInstalledError,
    SlurmSubmitError,
)
from asynctorchx.schedulers.slurm._request import SlurmVersion, parse_slurm_version
from asynctorchx.schedulers.slurm._state import (
    FIELD_SEPARATOR,
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    SlurmComponent,
    parse_sacct,
    parse_squeue,
)

#: Slurm's messages (sbatch 22.05, searched ignoring case) -> the run option or resource
#: field they are about.
SBATCH_OPTION_ERRORS: tuple[tuple[str, str], ...] = (
    (r"invalid partition|partition.*not (?:valid|available)", "partition"),
    (r"--time|time limit", "time"),
    (r"invalid feature specification", "constraint"),
    (r"invalid account|account.*(?:invalid|not valid)", "account"),
    (r"invalid qos", "qos"),
    (r"--mail-type", "mail-type"),
    (r"--mail-user", "mail-user"),
    (r"memory specification", "memMB"),
    (r"gres|generic resource|gpu", "gpu"),
    (r"cpu count|cpus-per-task", "cpu"),
)

#: Slurm's message when a job id is not (or no longer) known to the controller.
_INVALID_JOB_ID = "Invalid job id specified"
#: sacct's message on a cluster without accounting storage.
_NO_ACCOUNTING = "accounting storage is disabled"


class SlurmCommands:
    """Runs Slurm's client commands for one scheduler and counts them.

    Args:
        environment: the environment of every command (``None``: the process's own,
            so ``PATH`` and ``SLURM_CONF`` apply).
        max_concurrent: how many commands run at once at most (20 concurrent submits
            do not start 20 ``sbatch`` at once; the controller serialises them anyway).

    :attr:`counts` maps each command name (``squeue``, ``sbatch``...) to how many times it
    ran: tests and benchmarks read it to check that the watch makes one ``squeue`` per tick.
    """

    def __init__(self, environment: dict[str, str] | None = None, max_concurrent: int = 16) -> None:
        self.environment = environment
        self.counts: collections.Counter[str] = collections.Counter()
        self._limiter = anyio.CapacityLimiter(max_concurrent)

    async def run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
        """Run ``argv`` (no shell) and return its result, whatever its exit status.

        Args:
            argv: the command and its arguments.

        Returns:
            The completed process with its stdout and stderr as bytes.

        Raises:
            SlurmNotInstalledError: ``argv[0]`` is not on ``PATH``.
        """
        self.counts[argv[0]] += 1
        try:
            async with self._limiter:
                return await anyio.run_process(list(argv), env=self.environment, check=False)
        except FileNotFoundError:
            raise SlurmNotInstalledError(argv[0]) from None

    async def sbatch(self, argv: Sequence[str], options: Mapping[str, str]) -> str:
        """Submit a job with ``argv`` (``sbatch --parsable ... script``); return its id.

        Args:
            argv: the whole sbatch command, ``--parsable`` included.
            options: the job's ``#SBATCH`` options by name (``account`` -> ``ml``), so that
                the error names the value Slurm refused.

        Returns:
            The job id (for a heterogeneous job, the leader's); ``;cluster`` is dropped.

        Raises:
            SlurmNotInstalledError: ``sbatch`` is not on ``PATH``.
            SlurmSubmitError: sbatch refused an option (one of
                :data:`SBATCH_OPTION_ERRORS`); it names that option.
            SlurmCommandError: sbatch failed for another reason, or printed no job id.
        """
        done = await self.run(argv)
        stderr = _text(done.stderr)
        if done.returncode != 0:
            for pattern, option in SBATCH_OPTION_ERRORS:
                if re.search(pattern, stderr, re.IGNORECASE):
                    value = options.get(option)
                    raise SlurmSubmitError(list(argv), done.returncode, stderr, option, value)
            raise SlurmCommandError(list(argv), done.returncode, stderr)
        job_id = _text(done.stdout).strip().split(";", 1)[0]
        if not job_id.isdigit():
            raise SlurmCommandError(list(argv), 0, f"no job id in sbatch's output {job_id!r}")
        return job_id

    async def _stdout(self, argv: list[str], *, forgotten: str | None = None) -> str | None:
        """Run ``argv`` and return its stdout.

        Args:
            argv: the command.
            forgotten: a message of Slurm's on stderr that means "nothing to report"
                (a job the controller forgot, a cluster without accounting).

        Returns:
            stdout; ``None`` when the command failed saying ``forgotten``.

        Raises:
            SlurmNotInstalledError: ``argv[0]`` is not on ``PATH``.
            SlurmCommandError: it failed otherwise.
        """
        done = await self.run(argv)
        if done.returncode == 0:
            return _text(done.stdout)
        stderr = _text(done.stderr)
        if forgotten is not None and forgotten in stderr:
            return None
        raise SlurmCommandError(argv, done.returncode, stderr)

    async def squeue(self, job_ids: Collection[str] | None) -> dict[str, list[SlurmComponent]]:
        """The jobs the controller knows, in ONE ``squeue -h -t all`` call.

        Finished jobs are listed too, for ``MinJobAge`` seconds.

        Args:
            job_ids: job ids of apps (heterogeneous job leaders), asked for with ``-j``;
                ``None``: every job of the current user (``--me``).

        Returns:
            job id -> its components; jobs the controller forgot are left out.

        Raises:
            SlurmNotInstalledError: ``squeue`` is not on ``PATH``.
            SlurmCommandError: squeue failed (the controller does not answer).
        """
        if job_ids is not None and not job_ids:
            return {}
        selection = ["--me"] if job_ids is None else ["-j", ",".join(job_ids)]
        argv = ["squeue", "-h", "-t", "all", *selection, "-O", SQUEUE_FORMAT]
        # a single id that the controller forgot is an error of squeue's
        listed = parse_squeue(await self._stdout(argv, forgotten=_INVALID_JOB_ID) or "")
        return _only(listed, job_ids)

    async def sacct(
        self, job_ids: Collection[str] | None, starttime: str | None = None
    ) -> dict[str, list[SlurmComponent]] | None:
        """The accounting records of jobs, in ONE ``sacct -P -n -D`` call.

        Every run (``-D``: the restarts) and the steps (the ``.batch`` step's exit code).

        Args:
            job_ids: job ids of apps, asked for with ``-j``; ``None``: the current user's
                jobs since ``starttime`` (``--user=<uid>``: without it root would be shown
                every user's jobs).
            starttime: sacct's ``--starttime`` (``now-1days``); ``None``: sacct's default
                (today's jobs for ``job_ids=None``).

        Returns:
            job id -> its components with exit codes and restarts; ``None`` when the
            cluster has no accounting storage (``sacct`` says so) or no ``sacct`` is
            installed.

        Raises:
            SlurmCommandError: sacct failed for another reason.
        """
        if job_ids is not None and not job_ids:
            return {}
        selection = ["-j", ",".join(job_ids)] if job_ids is not None else [f"--user={os.getuid()}"]
        if starttime is not None:
            selection += ["-S", starttime]
        argv = ["sacct", "-P", "-n", "-D", f"--delimiter={FIELD_SEPARATOR}", "-o", SACCT_FIELDS]
        try:
            text = await self._stdout([*argv, *selection], forgotten=_NO_ACCOUNTING)
        except SlurmNotInstalledError:
            return None
        return None if text is None else _only(parse_sacct(text), job_ids)

    async def scancel(self, job_id: str) -> None:
        """Cancel the job (every component of a heterogeneous job); idempotent.

        scancel exits 0 for an id it does not know, and for a job already over.

        Args:
            job_id: the job's id.

        Raises:
            SlurmNotInstalledError: ``scancel`` is not on ``PATH``.
            SlurmCommandError: scancel failed (the controller does not answer).
        """
        await self._stdout(["scancel", job_id], forgotten=_INVALID_JOB_ID)

    async def version(self) -> SlurmVersion | None:
        """This host's Slurm release, from ``sinfo --version`` (no controller is asked).

        Returns:
            The release, or ``None`` when ``sinfo`` is missing, fails or prints no
            ``slurm X.Y...``.
        """
        try:
            done = await self.run(["sinfo", "--version"])
        except SlurmNotInstalledError:
            return None
        return parse_slurm_version(_text(done.stdout)) if done.returncode == 0 else None

    async def partition_memory_mb(self, partition: str | None) -> int | None:
        """Memory per node of ``partition`` (default: the cluster's default) in MB.

        Read from ``sinfo --format %P,%m --noconvert`` as
        ``torchx.schedulers.slurm_scheduler`` does.

        Args:
            partition: the partition's name; ``None``: the default partition.

        Returns:
            The memory, or ``None`` when ``sinfo`` is missing, fails or does not list it.
        """
        try:
            done = await self.run(["sinfo", "-h", "--format", "%P,%m", "--noconvert"])
        except SlurmNotInstalledError:
            return None
        if done.returncode != 0:
            return None
        for line in _text(done.stdout).splitlines():
            name, _, memory = line.strip().partition(",")
            is_default = name.endswith("*")
            if name.rstrip("*") == partition or (partition is None and is_default):
                digits = memory.strip().rstrip("M+")
                return int(digits) if digits.isdigit() else None
        return None


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _only(
    listed: dict[str, list[SlurmComponent]], job_ids: Collection[str] | None
) -> dict[str, list[SlurmComponent]]:
    """The jobs of ``listed`` among ``job_ids`` (``None``: all of them)."""
    if job_ids is None:
        return listed
    return {job_id: listed[job_id] for job_id in job_ids if job_id in listed}
