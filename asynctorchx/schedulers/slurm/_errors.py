"""The ``slurm`` scheduler's errors (re-exported by :mod:`asynctorchx.errors`)."""

from __future__ import annotations

from asynctorchx._error_bases import (
    InvalidRunConfigException,
    SchedulerRequestError,
    SchedulerUnavailableError,
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
