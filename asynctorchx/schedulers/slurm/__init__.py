"""The Slurm scheduler: an app runs as one heterogeneous ``sbatch`` job.

Follows ``torchx.schedulers.slurm_scheduler``. :mod:`._request` builds the ``sbatch``
command and script (pure, no I/O); ``scripts/slurm-cluster.sh`` starts a local cluster to
run them on (see ``docs/slurm-cluster.md``).
"""

from __future__ import annotations

from asynctorchx.schedulers.slurm._request import (
    SlurmBatchRequest,
    SlurmReplicaRequest,
    build_batch_request,
    check_time,
    slurm_runopts,
)

__all__ = [
    "SlurmBatchRequest",
    "SlurmReplicaRequest",
    "build_batch_request",
    "check_time",
    "slurm_runopts",
]
