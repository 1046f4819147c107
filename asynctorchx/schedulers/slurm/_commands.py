"""Slurm's client commands (squeue(1), sacct(1), sbatch(1), scancel(1)), run through anyio
without a shell, and the one mapping of their failures to errors."""

from __future__ import annotations

import collections
import functools
import logging
import os
import re
import subprocess
from collections.abc import Collection, Mapping, Sequence

import anyio
import tenacity

from asynctorchx.schedulers.slurm._errors import (
    SlurmCommandError,
    SlurmControllerUnreachableError,
    SlurmNotInstalledError,
    SlurmSubmitError,
    SlurmSubmitLimitError,
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

#: sbatch's words for a controller that did not take the request (slurm.conf(5) MessageTimeout)
_UNANSWERED = re.compile(
    r"unable to contact slurm controller|socket timed out|resource temporarily unavailable",
    re.IGNORECASE,
)
#: the reasons sbatch names for a full submit limit (resource_limits, "MaxSubmitJobs")
_SUBMIT_LIMIT = re.compile(r"\b(?:QOS|Assoc)\w*Submit\w*Limit\b")

_INVALID_JOB_ID = "Invalid job id specified"
logger = logging.getLogger(__name__)
_NO_ACCOUNTING = "accounting storage is disabled"


class SlurmCommands:
    """Runs Slurm's client commands for one scheduler; :attr:`counts` maps each command name
    to how many times it ran.

    Args:
        environment: every command's environment (``None``: the process's own).
        max_concurrent: how many commands run at once at most (a group's submits queue here).
        unanswered_timeout: seconds a submit keeps asking a controller that does not answer.
    """

    def __init__(
        self,
        environment: dict[str, str] | None = None,
        max_concurrent: int = 16,
        unanswered_timeout: float = 120.0,
    ) -> None:
        self.environment = environment
        self.counts: collections.Counter[str] = collections.Counter()
        self._limiter = anyio.CapacityLimiter(max_concurrent)
        self.unanswered_timeout = unanswered_timeout

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

    async def sbatch(
        self, argv: Sequence[str], options: Mapping[str, str], app_name: str | None = None
    ) -> str:
        """Run ``argv`` (``sbatch --parsable ... script``); return the job id (a heterogeneous
        job's leader's). ``options``: the ``#SBATCH`` options by name, for the error;
        ``app_name``: the app the job runs, for the warning.

        A controller that does not answer (``Unable to contact slurm controller``, ``Socket
        timed out``) is asked again with backoff for up to :attr:`unanswered_timeout` seconds;
        after a time-out the job is looked for by its script first, so it is never submitted
        twice. A full submit limit of the user's QOS or association
        (``QOSMaxSubmitJobPerUserLimit``...) is waited out: the submit is tried again with
        backoff while one of the user's jobs under that limit runs or waits. A submit that
        waits logs one warning (under logger ``asynctorchx.schedulers.slurm``) naming the app and
        why: Slurm's reason (``QOSMaxSubmitJobPerUserLimit``), or the unanswered controller.

        Raises:
            SlurmNotInstalledError: ``sbatch`` is not on ``PATH``.
            SlurmSubmitLimitError: a submit limit refused the job and no job of the user can
                make room (a zero limit).
            SlurmSubmitError: sbatch refused an option (:data:`SBATCH_OPTION_ERRORS`).
            SlurmCommandError: sbatch failed otherwise, printed no job id, or the controller
                did not answer within :attr:`unanswered_timeout`.
        """
        retrying = tenacity.AsyncRetrying(
            sleep=anyio.sleep,
            retry=tenacity.retry_if_exception_type((_Unanswered, _LimitFull)),
            stop=self._stop_retrying,
            wait=tenacity.wait_random_exponential(multiplier=0.2, max=5),
            before_sleep=functools.partial(_log_first_wait, app_name),
            reraise=True,
        )
        return await retrying(self._sbatch_once, list(argv), options)

    def _stop_retrying(self, state: tenacity.RetryCallState) -> bool:
        failed = state.outcome.exception() if state.outcome is not None else None
        waited = state.seconds_since_start or 0.0
        return isinstance(failed, _Unanswered) and waited >= self.unanswered_timeout

    async def _sbatch_once(self, argv: list[str], options: Mapping[str, str]) -> str:
        done = await self.run(argv)
        stderr = _text(done.stderr)
        if done.returncode == 0:
            job_id = _text(done.stdout).strip().split(";", 1)[0]
            if not job_id.isdigit():
                raise SlurmCommandError(argv, 0, f"no job id in sbatch's output {job_id!r}")
            return job_id
        if _UNANSWERED.search(stderr):
            # a time-out may come after the controller took the job: find it by its script
            submitted = await self._job_of_script(argv[-1])
            if submitted is not None:
                return submitted
            raise _Unanswered(argv, done.returncode, stderr)
        limit = _SUBMIT_LIMIT.search(stderr)
        if limit is not None:
            if await self._jobs_under(limit.group(), options):
                raise _LimitFull(argv, done.returncode, stderr, limit.group())
            raise SlurmSubmitLimitError(argv, done.returncode, stderr, limit.group())
        for pattern, option in SBATCH_OPTION_ERRORS:
            if re.search(pattern, stderr, re.IGNORECASE):
                raise SlurmSubmitError(argv, done.returncode, stderr, option, options.get(option))
        raise SlurmCommandError(argv, done.returncode, stderr)

    async def _job_of_script(self, script: str) -> str | None:
        """The id of the user's job whose batch script is ``script``, if the controller has one."""
        done = await self.run(["squeue", "--me", "-h", "-o", "%i|%o"])
        for line in _text(done.stdout).splitlines() if done.returncode == 0 else []:
            job_id, _, command = line.partition("|")
            if command == script:  # a component (12+0) or an array's elements (12_[0-9])
                return re.split(r"[+_]", job_id, maxsplit=1)[0]
        return None

    async def commented(self, word: str) -> list[str]:
        """The user's jobs ``squeue`` still shows whose comment has ``word`` (comma-separated)."""
        listed = await self._stdout(["squeue", "--me", "-h", "-t", "all", "-o", "%i|%k"])
        jobs = (line.partition("|") for line in (listed or "").splitlines())
        return sorted({job.split("+")[0] for job, _, comment in jobs if word in comment.split(",")})

    async def _jobs_under(self, limit: str, options: Mapping[str, str]) -> int:
        """How many of the user's jobs run or wait under the limit ``limit`` names."""
        argv = ["squeue", "--me", "-h", "-t", "PD,R,CF,CG,S,RQ", "-o", "%i"]
        if limit.startswith("QOS") and options.get("qos"):
            argv += ["-q", options["qos"]]
        elif limit.startswith("Assoc") and options.get("account"):
            argv += ["-A", options["account"]]
        done = await self.run(argv)
        return len(_text(done.stdout).split()) if done.returncode == 0 else 0

    async def _stdout(self, argv: list[str], *, forgotten: str | None = None) -> str | None:
        """``argv``'s stdout; ``None`` when it failed saying ``forgotten`` (nothing to report)."""
        done = await self.run(argv)
        if done.returncode == 0:
            return _text(done.stdout)
        stderr = _text(done.stderr)
        if forgotten is not None and forgotten in stderr:
            return None
        if _UNANSWERED.search(stderr):
            raise SlurmControllerUnreachableError(argv, done.returncode, stderr)
        raise SlurmCommandError(argv, done.returncode, stderr)

    async def squeue(self, job_ids: Collection[str] | None) -> dict[str, list[SlurmComponent]]:
        """App id -> components of ``job_ids`` (``None``: the user's) in one ``squeue -h -t all -r``
        (ended jobs stay listed ``MinJobAge`` seconds; ``-r``: one line per job array element,
        pending ones too); forgotten jobs are left out.

        Raises:
            SlurmNotInstalledError: ``squeue`` is not on ``PATH``.
            SlurmCommandError: squeue failed (the controller does not answer).
        """
        if job_ids is not None and not job_ids:
            return {}
        selection = ["--me"] if job_ids is None else ["-j", ",".join(job_ids)]
        argv = ["squeue", "-h", "-t", "all", "-r", *selection, "-O", SQUEUE_FORMAT]
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
        """Cancel the job, every component, or one job array element (``12_3``); idempotent
        (scancel exits 0 for an ended job).

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


class _Unanswered(SlurmControllerUnreachableError):
    """The controller did not take the request: asked again."""


class _LimitFull(SlurmSubmitLimitError):
    """A submit limit is full while a job of the user under it can end: tried again."""

    def __init__(self, argv: list[str], returncode: int, stderr: str, limit: str) -> None:
        super().__init__(argv, returncode, stderr, limit)
        self.args = (f"Slurm's {limit} is full: waiting for one of your jobs under it to end",)


def _log_first_wait(app_name: str | None, state: tenacity.RetryCallState) -> None:
    if state.attempt_number == 1 and state.outcome is not None:
        app = "" if app_name is None else f" of app {app_name!r}"
        logger.warning("the submit%s waits and tries again: %s", app, state.outcome.exception())


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _only(
    listed: dict[str, list[SlurmComponent]], job_ids: Collection[str] | None
) -> dict[str, list[SlurmComponent]]:
    if job_ids is None:
        return listed
    return {job_id: listed[job_id] for job_id in job_ids if job_id in listed}
