"""Experiment-tracker settings passed to an app's replicas through environment variables.

The names are TorchX's (``torchx.tracker.api``, set by ``torchx.runner.api.Runner``), so
a training script written for TorchX's trackers reads the same variables:

* ``TORCHX_JOB_ID``: the app handle of the job (``local_cwd://torchx/<app_id>``).
* ``TORCHX_PARENT_RUN_ID``: the run this job belongs to (``--parent_run_id``, or the same
  variable in the launching environment, which wins).
* ``TORCHX_TRACKERS``: comma-separated tracker names.
* ``TORCHX_TRACKER_<NAME>_CONFIG``: the config (often a file or URI) of tracker ``<NAME>``
  (upper-cased).

Which trackers: the keys of ``[torchx:tracker]`` in the ``.torchxconfig``, replaced by
``$TORCHX_TRACKERS`` when set; each tracker's config is ``config`` in
``[tracker:<name>]``, replaced by ``$TORCHX_TRACKER_<NAME>_CONFIG`` when set.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from asynctorchx.runner.config import Sections, get_configs, load_sections

logger = logging.getLogger(__name__)

ENV_TORCHX_JOB_ID = "TORCHX_JOB_ID"
ENV_TORCHX_PARENT_RUN_ID = "TORCHX_PARENT_RUN_ID"
ENV_TORCHX_TRACKERS = "TORCHX_TRACKERS"


def tracker_config_env_var_name(name: str) -> str:
    """Return ``TORCHX_TRACKER_<NAME>_CONFIG`` for tracker ``name`` (upper-cased)."""
    return f"TORCHX_TRACKER_{name.upper()}_CONFIG"


def get_configured_trackers(
    dirs: Iterable[str] | None = None, *, sections: Sections | None = None
) -> dict[str, str | None]:
    """Return ``{tracker name: config or None}`` from the config files and the environment.

    Args:
        dirs: directories to look in for ``.torchxconfig`` (see
            :func:`asynctorchx.runner.config.find_configs`).
        sections: the config sections already read
            (:func:`asynctorchx.runner.config.load_sections`); the files are read only
            when it is ``None``.

    Raises:
        ConfigError: a config file is unreadable (see :mod:`asynctorchx.runner.config`).
    """
    if sections is None:
        sections = load_sections(dirs=dirs)
    names = list(sections.get("torchx:tracker", {}))
    env_names = os.environ.get(ENV_TORCHX_TRACKERS)
    if env_names is not None:
        names = [name.strip() for name in env_names.split(",") if name.strip()]
        logger.info("using %s=%s as tracker names", ENV_TORCHX_TRACKERS, env_names)
    trackers: dict[str, str | None] = {}
    for name in names:
        config = sections.get(f"tracker:{name}", {}).get("config")
        env_config = os.environ.get(tracker_config_env_var_name(name))
        if env_config is not None:
            config = env_config
        trackers[name] = config
    return trackers


__all__ = [
    "ENV_TORCHX_JOB_ID",
    "ENV_TORCHX_PARENT_RUN_ID",
    "ENV_TORCHX_TRACKERS",
    "get_configs",
    "get_configured_trackers",
    "tracker_config_env_var_name",
]
