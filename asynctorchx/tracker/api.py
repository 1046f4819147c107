"""Experiment trackers, at TorchX's import path ``torchx.tracker.api``.

The settings passed to an app's replicas through environment variables. The names are
TorchX's (``torchx.tracker.api``, set by ``torchx.runner.api.Runner``), so a training
script written for TorchX's trackers reads the same variables:

* ``TORCHX_JOB_ID``: the app handle of the job (``local_cwd://torchx/<app_id>``).
* ``TORCHX_PARENT_RUN_ID``: the run this job belongs to (``--parent_run_id``, or the same
  variable in the launching environment, which wins).
* ``TORCHX_TRACKERS``: comma-separated tracker names.
* ``TORCHX_TRACKER_<NAME>_CONFIG``: the config (often a file or URI) of tracker ``<NAME>``
  (upper-cased).

Which trackers: the keys of ``[torchx:tracker]`` in the ``.torchxconfig``, replaced by
``$TORCHX_TRACKERS`` when set; each tracker's config is ``config`` in
``[tracker:<name>]``, replaced by ``$TORCHX_TRACKER_<NAME>_CONFIG`` when set.
TorchX's tracker classes (``AppRun``, ``TrackerSource``, ...) are not provided.
"""

from __future__ import annotations

import logging
import os
import pkgutil
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from asynctorchx.util.entrypoints import entry_points

if TYPE_CHECKING:
    from asynctorchx.runner.config import Sections

logger = logging.getLogger(__name__)

ENV_TORCHX_JOB_ID = "TORCHX_JOB_ID"
ENV_TORCHX_PARENT_RUN_ID = "TORCHX_PARENT_RUN_ID"
ENV_TORCHX_TRACKERS = "TORCHX_TRACKERS"


#: The entry point group of tracker factories (TorchX's, so TorchX's trackers are found).
TRACKER_ENTRY_POINT_GROUP = "torchx.tracker"


class TrackerBase(Protocol):
    """What a tracker answers about jobs: TorchX's ``torchx.tracker.api.TrackerBase``
    queries, so a TorchX tracker (such as its ``fsspec`` one) is one.

    Its methods are synchronous, as TorchX's; the ``add_*`` methods a job calls are not
    needed to query and are left out.
    """

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        """Return the run ids, filtered by ``kwargs`` (``parent_run_id``)."""

    def metadata(self, run_id: str) -> Mapping[str, object]:
        """Return the metadata of ``run_id``."""

    def artifacts(self, run_id: str) -> Mapping[str, Any]:
        """Return the artifacts of ``run_id`` by name (each with ``name``, ``path``,
        ``metadata``)."""

    def sources(self, run_id: str, artifact_name: str | None = None) -> Iterable[Any]:
        """Return the sources of ``run_id`` (each with ``source_run_id``,
        ``artifact_name``)."""


def _load_path(path: str) -> object | None:
    """Return what ``module.path:attr`` names (:func:`pkgutil.resolve_name`; ``None``
    when it does not import)."""
    try:
        found: object = pkgutil.resolve_name(path)
    except (ImportError, AttributeError, ValueError):
        return None
    return found


def build_trackers(configured: Mapping[str, str | None]) -> list[TrackerBase]:
    """Create the trackers ``configured`` names (:func:`get_configured_trackers`).

    As ``torchx.tracker.api.build_trackers``: a name is an entry point of the group
    ``torchx.tracker`` (TorchX's ``fsspec``), else a ``module.path:factory`` path; the
    factory is called with the tracker's config (or ``None``). A name found neither way
    is skipped with a logged warning.

    Args:
        configured: ``{tracker name: config or None}``.

    Raises:
        Exception: whatever a tracker's factory raises.
    """
    by_name = {ep.name: ep for ep in entry_points(TRACKER_ENTRY_POINT_GROUP)}
    trackers: list[TrackerBase] = []
    for name, config in configured.items():
        entry_point = by_name.get(name)
        factory = entry_point.load() if entry_point is not None else _load_path(name)
        if not callable(factory):
            logger.warning(
                "no tracker factory %r: it is neither a %r entry point nor a"
                " `module.path:factory` path; skipped",
                name,
                TRACKER_ENTRY_POINT_GROUP,
            )
            continue
        trackers.append(factory(config))
    return trackers


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
        # at call time: asynctorchx.runner imports this module
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
        env_config = os.environ.get(tracker_config_env_var_name(name))
        if env_config is not None:
            config = env_config
        trackers[name] = config
    return trackers


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
