"""Experiment trackers, at TorchX's import path ``torchx.tracker``.

A thin re-export: the code lives in :mod:`asynctorchx.runner.tracker` (the environment
variables the Runner gives each replica, and building the configured trackers). See
:mod:`asynctorchx.tracker.api`.
"""

from asynctorchx.tracker.api import (
    ENV_TORCHX_JOB_ID,
    ENV_TORCHX_PARENT_RUN_ID,
    ENV_TORCHX_TRACKERS,
    TrackerBase,
    build_trackers,
    tracker_config_env_var_name,
)

__all__ = [
    "ENV_TORCHX_JOB_ID",
    "ENV_TORCHX_PARENT_RUN_ID",
    "ENV_TORCHX_TRACKERS",
    "TrackerBase",
    "build_trackers",
    "tracker_config_env_var_name",
]
