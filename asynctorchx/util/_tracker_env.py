"""The tracker settings the Runner gives each replica; apart from :mod:`asynctorchx.tracker.api`
(which re-exports them) so that a run configuring no tracker imports no tracker code.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from asynctorchx.runner.config import Sections

logger = logging.getLogger("asynctorchx.tracker.api")

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
        dirs: directories to look in for ``.torchxconfig``.
        sections: the config sections already read; ``None``: read the files.

    Raises:
        ConfigError: a config file is unreadable.
    """
    if sections is None:
        # at call time: a training script importing the tracker needs no runner
        from asynctorchx.runner.config import load_sections

        sections = load_sections(dirs=dirs)
    names = list(sections.get("torchx:tracker", {}))
    env_names = os.environ.get(ENV_TORCHX_TRACKERS)
    if env_names is not None:
        names = [name.strip() for name in env_names.split(",") if name.strip()]
        logger.info("using %s=%s as tracker names", ENV_TORCHX_TRACKERS, env_names)
    trackers: dict[str, str | None] = {}
    for name in names:
        config = sections.get(f"tracker:{name}", {}).get("config")
        trackers[name] = os.environ.get(tracker_config_env_var_name(name), config)
    return trackers
