"""Experiment trackers, at TorchX's import path ``torchx.tracker``.

TorchX's ``torchx.tracker`` re-exports ``torchx.tracker.api``; so does this package. See
:mod:`asynctorchx.tracker.api` (the environment variables the Runner gives each replica,
and building the configured trackers).
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
