"""Slurm's client commands, run through anyio, and the one mapping of their failures to errors.

Every command is an argv list given to :func:`anyio.run_process` (never a shell). A
command missing from ``PATH`` is :class:`~asynctorchx.errors.SlurmNotInstalledError`;
``sbatch`` refusing an option (an unknown partition, a bad ``--time``) is
:class:`~asynctorchx.errors.SlurmSubmitError` naming that option and carrying Slurm's
message; any other failure is :class:`~asynctorchx.errors.SlurmCommandError`. No other
module of the Slurm scheduler runs a process.

The commands and their output formats are those of squeue(1), sacct(1), scontrol(1),
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
from asynctorchx.schedulers.slurm._state import (
    FIELD_SEPARATOR,
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    SlurmComponent,
    parse_sacct,
    parse_scontrol_jobs,
    parse_squeue,
)

#: Slurm's messages (sbatch 22.05) -> the run option or resource field they are about.
SBATCH_OPTION_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), option)
    for pattern, option in (
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
)

#: Slurm's message when a job id is not (or no longer) known to the controller.
_INVALID_JOB_ID = "Invalid job id specified"
#: sacct's message on a cluster without accounting storage.
_NO_ACCOUNTING = "accounting storage is disabled"


def option_of_sbatch_error(stderr: str) -> str | None:
    """The run option (or resource field) an ``sbatch`` error message is about, if known.

    Args:
        stderr: sbatch's error output.

    Returns:
        ``partition``, ``time``, ``constraint``, ``account``, ``qos``, ``mail-type``,
        ``mail-user``, ``memMB``, ``gpu``, ``cpu``; ``None`` when the message names none.
    """
    for pattern, option in SBATCH_OPTION_ERRORS:
        if pattern.search(stderr):
            return option
    return None


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
        self.max_concurrent = max_concurrent
        self.counts: collections.Counter[str] = collections.Counter()
        self._limiter: anyio.CapacityLimiter | None = None

    async def run(
        self, argv: Sequence[str], *, cwd: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``argv`` (no shell) and return its result.

        Args:
            argv: the command and its arguments.
            cwd: the directory to run it in (``None``: the current one).
            check: raise when it exits with a non-zero status.

        Returns:
            The completed process with its stdout and stderr as bytes.

        Raises:
            SlurmNotInstalledError: ``argv[0]`` is not on ``PATH``.
            SlurmCommandError: ``check`` and it failed.
        """
        self.counts[argv[0]] += 1
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_concurrent)
        try:
            async with self._limiter:
                done = await anyio.run_process(
                    list(argv), cwd=cwd, env=self.environment, check=False
                )
        except FileNotFoundError as error:
            if cwd is not None and error.filename == cwd:
                raise
            raise SlurmNotInstalledError(argv[0]) from None
        if check and done.returncode != 0:
            raise SlurmCommandError(list(argv), done.returncode, _text(done.stderr))
        return done

    async def sbatch(
        self, argv: Sequence[str], cwd: str | None = None, options: Mapping[str, str] | None = None
    ) -> str:
        """Submit a job with ``argv`` (``sbatch --parsable ... script``); return its id.

        Args:
            argv: the whole sbatch command, ``--parsable`` included.
            cwd: the directory to submit from.
            options: the job's ``#SBATCH`` options by name (``account`` -> ``ml``), so that
                the error names the value Slurm refused.

        Returns:
            The job id (for a heterogeneous job, the leader's); ``;cluster`` is dropped.

        Raises:
            SlurmNotInstalledError: ``sbatch`` is not on ``PATH``.
            SlurmSubmitError: sbatch refused an option; it names that option.
            SlurmCommandError: sbatch failed for another reason, or printed no job id.
        """
        done = await self.run(argv, cwd=cwd, check=False)
        stderr = _text(done.stderr)
        if done.returncode != 0:
            option = option_of_sbatch_error(stderr)
            if option is not None:
                value = (options or {}).get(option)
                raise SlurmSubmitError(list(argv), done.returncode, stderr, option, value)
            raise SlurmCommandError(list(argv), done.returncode, stderr)
        job_id = _text(done.stdout).strip().split(";", 1)[0]
        if not job_id.isdigit():
            raise SlurmCommandError(list(argv), 0, f"no job id in sbatch's output {job_id!r}")
        return job_id

    async def squeue(self, job_ids: Collection[str]) -> dict[str, list[SlurmComponent]]:
        """The jobs among ``job_ids`` the controller knows, in ONE ``squeue`` call.

        ``squeue -h -t all -j id,id,...``: finished jobs too, for ``MinJobAge`` seconds.

        Args:
            job_ids: job ids of apps (heterogeneous job leaders).

        Returns:
            job id -> its components; jobs the controller forgot are left out.

        Raises:
            SlurmNotInstalledError: ``squeue`` is not on ``PATH``.
            SlurmCommandError: squeue failed (the controller does not answer).
        """
        if not job_ids:
            return {}
        argv = ["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", SQUEUE_FORMAT]
        done = await self.run(argv, check=False)
        if done.returncode != 0:
            stderr = _text(done.stderr)
            if _INVALID_JOB_ID in stderr:  # a single id that the controller forgot
                return {}
            raise SlurmCommandError(argv, done.returncode, stderr)
        listed = parse_squeue(_text(done.stdout))
        return {job_id: listed[job_id] for job_id in job_ids if job_id in listed}

    async def squeue_mine(self) -> dict[str, list[SlurmComponent]]:
        """Every job of the current user the controller knows (``squeue --me -t all``).

        Returns:
            job id -> its components.

        Raises:
            SlurmNotInstalledError: ``squeue`` is not on ``PATH``.
            SlurmCommandError: squeue failed.
        """
        done = await self.run(["squeue", "-h", "--me", "-t", "all", "-o", SQUEUE_FORMAT])
        return parse_squeue(_text(done.stdout))

    async def sacct(self, job_ids: Collection[str]) -> dict[str, list[SlurmComponent]] | None:
        """The accounting records of ``job_ids`` (``sacct -P -n -D -j id,id,...``), ONE call.

        Args:
            job_ids: job ids of apps.

        Returns:
            job id -> its components with exit codes; ``None`` when the cluster has no
            accounting storage (``sacct`` says so) or no ``sacct`` is installed.

        Raises:
            SlurmCommandError: sacct failed for another reason.
        """
        if not job_ids:
            return {}
        listed = await self._sacct(["-j", ",".join(job_ids)])
        if listed is None:
            return None
        return {job_id: listed[job_id] for job_id in job_ids if job_id in listed}

    async def sacct_mine(self, starttime: str) -> dict[str, list[SlurmComponent]] | None:
        """The current user's jobs accounting knows since ``starttime``, in ONE ``sacct`` call.

        ``sacct -P -n -D -S starttime --user=<uid>``: without ``--user`` root would be
        shown every user's jobs.

        Args:
            starttime: sacct's ``--starttime`` (``now-1days``).

        Returns:
            job id -> its components; ``None`` without accounting (as :meth:`sacct`).

        Raises:
            SlurmCommandError: sacct failed for another reason.
        """
        return await self._sacct(["-S", starttime, f"--user={os.getuid()}"])

    async def _sacct(self, selection: list[str]) -> dict[str, list[SlurmComponent]] | None:
        # every run (-D: restarts) and the steps (the .batch step's exit code), not -X
        argv = ["sacct", "-P", "-n", "-D", f"--delimiter={FIELD_SEPARATOR}"]
        argv += ["-o", SACCT_FIELDS, *selection]
        try:
            done = await self.run(argv, check=False)
        except SlurmNotInstalledError:
            return None
        if done.returncode != 0:
            stderr = _text(done.stderr)
            if _NO_ACCOUNTING in stderr:
                return None
            raise SlurmCommandError(argv, done.returncode, stderr)
        return parse_sacct(_text(done.stdout))

    async def exit_codes(self, job_id: str) -> dict[int | None, tuple[int | None, int]]:
        """Each component's exit code and restarts (``scontrol -o show job``).

        Args:
            job_id: the job's id.

        Returns:
            component offset -> ``(exit code, restarts)``; empty when the controller no
            longer knows the job.

        Raises:
            SlurmCommandError: scontrol failed for another reason.
        """
        argv = ["scontrol", "-o", "show", "job", job_id]
        done = await self.run(argv, check=False)
        if done.returncode != 0:
            stderr = _text(done.stderr)
            if _INVALID_JOB_ID in stderr:
                return {}
            raise SlurmCommandError(argv, done.returncode, stderr)
        return parse_scontrol_jobs(_text(done.stdout))

    async def scancel(self, job_id: str) -> None:
        """Cancel the job (every component of a heterogeneous job); idempotent.

        scancel exits 0 for an id it does not know, and for a job already over.

        Args:
            job_id: the job's id.

        Raises:
            SlurmNotInstalledError: ``scancel`` is not on ``PATH``.
            SlurmCommandError: scancel failed (the controller does not answer).
        """
        done = await self.run(["scancel", job_id], check=False)
        stderr = _text(done.stderr)
        if done.returncode != 0 and _INVALID_JOB_ID not in stderr:
            raise SlurmCommandError(["scancel", job_id], done.returncode, stderr)

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
            done = await self.run(["sinfo", "-h", "--format", "%P,%m", "--noconvert"], check=False)
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
