"""TorchX's import path ``torchx.schedulers.slurm_scheduler``: a thin re-export.

The code lives in :mod:`asynctorchx.schedulers.slurm` (``_scheduler.py``, ``_request.py``,
``_state.py``, ``_commands.py``, ``_logs.py``).
"""

from __future__ import annotations

from asynctorchx.schedulers.slurm import (
    SLURM_STATES,
    SlurmBatchRequest,
    SlurmReplicaRequest,
    SlurmScheduler,
    create_scheduler,
)

__all__ = [
    "SLURM_STATES",
    "SlurmBatchRequest",
    "SlurmReplicaRequest",
    "SlurmScheduler",
    "create_scheduler",
]
