"""The tracker names at TorchX's import path ``torchx.tracker.api``.

A thin re-export of :mod:`asynctorchx.runner.tracker`, where they live: the
environment variable names (``TORCHX_JOB_ID``, ``TORCHX_PARENT_RUN_ID``,
``TORCHX_TRACKERS``, ``TORCHX_TRACKER_<NAME>_CONFIG``) that ``Runner.dryrun`` writes
into every role's env, and building the configured trackers. TorchX's tracker classes
(``AppRun``, ``TrackerSource``, ...) are not provided.
"""

from asynctorchx.runner.tracker import (
    ENV_TORCHX_JOB_ID,
    ENV_TORCHX_PARENT_RUN_ID,
    ENV_TORCHX_TRACKERS,
    TRACKER_ENTRY_POINT_GROUP,
    TrackerBase,
    build_trackers,
    get_configured_trackers,
    tracker_config_env_var_name,
)

__all__ = [
    "ENV_TORCHX_JOB_ID",
    "ENV_TORCHX_PARENT_RUN_ID",
    "ENV_TORCHX_TRACKERS",
    "TRACKER_ENTRY_POINT_GROUP",
    "TrackerBase",
    "build_trackers",
    "get_configured_trackers",
    "tracker_config_env_var_name",
]
