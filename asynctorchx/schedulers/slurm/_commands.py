"""Slurm's client commands (squeue(1), sacct(1), sbatch(1), scancel(1)), run through anyio
without a shell, and the one mapping of their failures to errors."""

from __future__ import annotations

import collections
import os
import re
import subprocess
from collections.abc import Collection, Mapping, Sequence

import anyio

from asynctorchx.schedulers.slurm._errors import (
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

#: sbatch's messages (searched ignoring case) -> the run option or resource field they name.
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

_INVALID_JOB_ID = "Invalid job id specified"
_NO_ACCOUNTING = "accounting storage is disabled"


class SlurmCommands:
    """Runs Slurm's client commands for one scheduler; :attr:`counts` maps each command name
    to how many times it ran.

    Args:
        environment: every command's environment (``None``: the process's own).
        max_concurrent: how many commands run at once at most.
    """

    def __init__(self, environment: dict[str, str] | None = None, max_concurrent: int = 16) -> None:
        self.environment = environment
        self.counts: collections.Counter[str] = collections.Counter()
        self._limiter = anyio.CapacityLimiter(max_concurrent)

    async def run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
        """Run ``argv`` (no shell); return its result whatever its exit status.

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
        """Run ``argv`` (``sbatch --parsable ... script``); return the job id (a heterogeneous
        job's leader's). ``options``: the ``#SBATCH`` options by name, for the error.

        Raises:
            SlurmNotInstalledError: ``sbatch`` is not on ``PATH``.
            SlurmSubmitError: sbatch refused an option (:data:`SBATCH_OPTION_ERRORS`).
            SlurmCommandError: sbatch failed otherwise, or printed no job id.
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
        """``argv``'s stdout; ``None`` when it failed saying ``forgotten`` (nothing to report)."""
        done = await self.run(argv)
        if done.returncode == 0:
            return _text(done.stdout)
        stderr = _text(done.stderr)
        if forgotten is not None and forgotten in stderr:
            return None
        raise SlurmCommandError(argv, done.returncode, stderr)

    async def squeue(self, job_ids: Collection[str] | None) -> dict[str, list[SlurmComponent]]:
        """Job id -> components of ``job_ids`` (``None``: the user's) in one ``squeue -h -t all``
        (ended jobs stay listed ``MinJobAge`` seconds); forgotten jobs are left out.

        Raises:
            SlurmNotInstalledError: ``squeue`` is not on ``PATH``.
            SlurmCommandError: squeue failed (the controller does not answer).
        """
        if job_ids is not None and not job_ids:
            return {}
        selection = ["--me"] if job_ids is None else ["-j", ",".join(job_ids)]
        argv = ["squeue", "-h", "-t", "all", *selection, "-O", SQUEUE_FORMAT]
        # squeue fails for a single id the controller forgot
        listed = parse_squeue(await self._stdout(argv, forgotten=_INVALID_JOB_ID) or "")
        return _only(listed, job_ids)

    async def sacct(
        self, job_ids: Collection[str] | None, starttime: str | None = None
    ) -> dict[str, list[SlurmComponent]] | None:
        """Job id -> components with exit codes and restarts, in one ``sacct -P -n -D`` of
        ``job_ids`` (``None``: the user's jobs since ``starttime``, ``--user`` so that root is
        not shown everyone's); ``None`` without accounting storage or ``sacct``.

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
        """Cancel the job, every component; idempotent (scancel exits 0 for an ended job).

        Raises:
            SlurmNotInstalledError: ``scancel`` is not on ``PATH``.
            SlurmCommandError: scancel failed (the controller does not answer).
        """
        await self._stdout(["scancel", job_id], forgotten=_INVALID_JOB_ID)

    async def _sinfo(self, *args: str) -> str:
        """``sinfo``'s stdout; empty when sinfo is missing or fails (it only informs)."""
        try:
            done = await self.run(["sinfo", *args])
        except SlurmNotInstalledError:
            return ""
        return _text(done.stdout) if done.returncode == 0 else ""

    async def version(self) -> SlurmVersion | None:
        """This host's Slurm release (``sinfo --version``); ``None`` when it does not tell."""
        return parse_slurm_version(await self._sinfo("--version"))

    async def partition_memory_mb(self, partition: str | None) -> int | None:
        """MB per node of ``partition`` (``None``: the default one) from ``sinfo --noconvert``,
        as TorchX reads it; ``None`` when sinfo does not tell."""
        for line in (await self._sinfo("-h", "--format", "%P,%m", "--noconvert")).splitlines():
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
    if job_ids is None:
        return listed
    return {job_id: listed[job_id] for job_id in job_ids if job_id in listed}
