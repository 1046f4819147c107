"""Where a Slurm app's log files are, and following them until the job ends.

``srun`` writes each replica's stdout and stderr to ``slurm-{job_id}-{role}-{replica}.out``
and ``.err`` in the job's directory (``--chdir``, the ``job_dir`` run option, else the
directory ``sbatch`` ran in), as ``torchx.schedulers.slurm_scheduler`` lays them out.
TorchX finds a ``job_dir`` through the file ``.torchxslurmjobdirs`` in the current
directory (``{job_id} = {job_dir}`` lines); this module writes and reads the same file so
either tool finds the other's logs.

The scheduler follows the files with :func:`~asynctorchx.schedulers.toolkit.tail_blocks`:
read off the event loop (``offload_reads``: on a shared filesystem, NFS or Lustre, a read
can block) and woken at each tick of its batched ``squeue`` poller, as Slurm pushes
nothing when a file grows or a job ends.
"""

from __future__ import annotations

import os

import anyio

from asynctorchx.schedulers._responses import Stream

#: TorchX's file of job directories, in the current directory
#: (``torchx.schedulers.slurm_scheduler.SLURM_JOB_DIRS``).
JOB_DIRS_FILE = ".torchxslurmjobdirs"


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


async def save_job_dir(job_id: str, job_dir: str) -> None:
    """Append ``{job_id} = {job_dir}`` to :data:`JOB_DIRS_FILE` in the current directory.

    What ``torchx.schedulers.slurm_scheduler`` does when it submits with a ``job_dir``, so
    that TorchX's ``log_iter`` run from this directory finds the logs.

    Args:
        job_id: the job id.
        job_dir: the job's directory (absolute).

    Raises:
        OSError: the file cannot be written.
    """
    async with await anyio.open_file(JOB_DIRS_FILE, "a") as file:
        await file.write(f"{job_id} = {job_dir}\n")


async def read_job_dirs() -> dict[str, str]:
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


def job_dir_or_cwd(*candidates: str | None) -> str:
    """The first non-empty directory among ``candidates``, else the current directory.

    Args:
        candidates: directories in order of preference (``None`` or empty: skipped).
    """
    for candidate in candidates:
        if candidate:
            return candidate
    return os.getcwd()
