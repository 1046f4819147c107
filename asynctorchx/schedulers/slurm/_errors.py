"""The ``slurm`` scheduler's errors (re-exported by :mod:`asynctorchx.errors`)."""

from __future__ import annotations

from asynctorchx._error_bases import (
    InvalidRunConfigException,
    SchedulerRequestError,
    SchedulerUnavailableError,
    SchedulerUnreachableError,
)


class SlurmNotInstalledError(SchedulerUnavailableError):
    """A Slurm client command (``sbatch``, ``squeue``...) is not on ``PATH``."""

    def __init__(self, command: str) -> None:
        super().__init__(
            f"Slurm's client tools are not installed: {command!r} is not on PATH. Install"
            " them (Debian: `apt-get install slurm-client`) or run on a Slurm login node;"
            " `bash scripts/slurm-cluster.sh start` starts a local cluster"
        )
        self.command = command


class SlurmCommandError(SchedulerRequestError):
    """A Slurm command failed; the message carries Slurm's own error text."""

    def __init__(self, argv: list[str], returncode: int, stderr: str) -> None:
        super().__init__(
            f"`{' '.join(argv)}` failed with exit status {returncode}: {stderr.strip()}"
        )
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr


class SlurmControllerUnreachableError(SlurmCommandError, SchedulerUnreachableError):
    """slurmctld did not answer a command (``Unable to contact slurm controller``, ``Socket
    timed out``): it is down or restarting (slurm.conf(5) ``MessageTimeout``)."""


class SlurmSubmitError(SlurmCommandError, InvalidRunConfigException):
    """``sbatch`` refused one of the job's options; ``cfg_key`` names it (``partition``)."""

    def __init__(
        self, argv: list[str], returncode: int, stderr: str, option: str, value: str | None = None
    ) -> None:
        SlurmCommandError.__init__(self, argv, returncode, stderr)
        refused = f"{option}={value!r}" if value is not None else repr(option)
        message = (
            f"Slurm refused {refused} of this job: {stderr.strip()} (`{' '.join(argv)}`"
            f" exited with {returncode}); fix {option!r} and submit again"
        )
        self.args = (message,)
        self.cfg_key: str | None = option
        self.cfg = None


class SlurmSubmitLimitError(SlurmSubmitError):
    """A submit limit of the user's QOS or association (``limit``, Slurm's reason, such as
    ``QOSMaxSubmitJobPerUserLimit``) refused the job while no job of the user under it runs
    or waits, so none can end and make room (a zero limit). ``cfg_key`` is ``qos`` or
    ``account``: the run option that picks another limit."""

    def __init__(self, argv: list[str], returncode: int, stderr: str, limit: str) -> None:
        option = "account" if limit.startswith("Assoc") else "qos"
        SlurmSubmitError.__init__(self, argv, returncode, stderr, option)
        self.limit = limit
        self.args = (
            f"Slurm's {limit} refused this job and none of your jobs under that limit runs or"
            f" waits, so none can make room: submit with another {option!r}, or ask for the"
            f" limit to be raised (sacctmgr(1) MaxSubmitJobs)",
        )
