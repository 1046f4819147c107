"""``slurm`` at TorchX's import path ``torchx.schedulers.slurm_scheduler``."""

from __future__ import annotations

from asynctorchx.schedulers.slurm._commands import SlurmCommands
from asynctorchx.schedulers.slurm._request import (
    MAX_ARRAY,
    SlurmBatchRequest,
    SlurmOpts,
    SlurmReplicaRequest,
    array_script,
    array_shape,
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
    "MAX_ARRAY",
    "SLURM_STATES",
    "SlurmBatchRequest",
    "SlurmCommands",
    "SlurmComponent",
    "SlurmOpts",
    "SlurmReplicaRequest",
    "SlurmScheduler",
    "array_script",
    "array_shape",
    "build_batch_request",
    "check_time",
    "create_scheduler",
    "slurm_runopts",
]
