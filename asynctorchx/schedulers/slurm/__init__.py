"""The Slurm scheduler: an app runs as one heterogeneous ``sbatch`` job.

Follows ``torchx.schedulers.slurm_scheduler``. The modules, one concern each:

- :mod:`._request`: the ``sbatch`` command and script (pure, no I/O);
- :mod:`._state`: Slurm's states and the text of ``squeue``/``sacct``/``scontrol`` (pure);
- :mod:`._commands`: runs Slurm's commands and maps their failures to
  :mod:`asynctorchx.errors`;
- :mod:`._logs`: the replicas' log files, followed until the job ends;
- :mod:`._scheduler`: :class:`SlurmScheduler` and :func:`create_scheduler`.

``scripts/slurm-cluster.sh`` starts a local cluster (see ``docs/slurm-cluster.md``);
``docs/slurm.md`` describes the run options and how ``wait`` works.
"""

from __future__ import annotations

from asynctorchx.schedulers.slurm._commands import SlurmCommands
from asynctorchx.schedulers.slurm._request import (
    SlurmBatchRequest,
    SlurmReplicaRequest,
    build_batch_request,
    check_time,
    slurm_runopts,
)
from asynctorchx.schedulers.slurm._scheduler import (
    DEFAULT_POLL_INTERVAL,
    SlurmScheduler,
    create_scheduler,
)
from asynctorchx.schedulers.slurm._state import SLURM_STATES, SlurmComponent

__all__ = [
    "DEFAULT_POLL_INTERVAL",
    "SLURM_STATES",
    "SlurmBatchRequest",
    "SlurmCommands",
    "SlurmComponent",
    "SlurmReplicaRequest",
    "SlurmScheduler",
    "build_batch_request",
    "check_time",
    "create_scheduler",
    "slurm_runopts",
]
