"""Experiment trackers, at TorchX's import path ``torchx.tracker.api``.

Synchronous, as TorchX's: a training script is not an event loop.
"""

from __future__ import annotations

import logging
import os
import pkgutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Protocol

from asynctorchx.plugins import PluginType, registry
from asynctorchx.util._tracker_env import (
    ENV_TORCHX_JOB_ID,
    ENV_TORCHX_PARENT_RUN_ID,
    ENV_TORCHX_TRACKERS,
    get_configured_trackers,
    tracker_config_env_var_name,
)
from asynctorchx.util.entrypoints import entry_points

logger = logging.getLogger(__name__)

#: The entry point group of tracker factories (TorchX's, so TorchX's trackers are found).
TRACKER_ENTRY_POINT_GROUP = "torchx.tracker"

#: Trackers used when no entry point has their name (TorchX's ``fsspec`` wins: same layout).
_BUILTIN_TRACKERS = {"fsspec": "asynctorchx.tracker.backend.fsspec:create"}


@dataclass(frozen=True)
class TrackerSource:
    """A run a tracked run consumed (``torchx.tracker.api.TrackerSource``).

    Attributes:
        source_run_id: the source's app handle, or the id of an entity outside TorchX.
        artifact_name: what of the source was consumed (``None``: the run as a whole).
    """

    source_run_id: str
    artifact_name: str | None


@dataclass(frozen=True)
class TrackerArtifact:
    """An artifact of a run (``torchx.tracker.api.TrackerArtifact``).

    Attributes:
        name: the artifact's name, unique in its run (a later one replaces it).
        path: where the artifact is (a path or URI; the tracker does not read it).
        metadata: JSON-serializable details, or ``None``.
    """

    name: str
    path: str
    metadata: Mapping[str, object] | None


class TrackerBase(Protocol):
    """A tracker: TorchX's ``torchx.tracker.api.TrackerBase`` writes and queries, so a
    TorchX tracker is one (without ``lineage``, which TorchX's ``fsspec`` leaves unimplemented).
    """

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        """Record ``kwargs`` (JSON-serializable) as metadata of ``run_id``."""

    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        """Record the artifact ``name`` at ``path`` of ``run_id``."""

    def add_source(self, run_id: str, source_id: str, artifact_name: str | None = None) -> None:
        """Record that ``run_id`` consumed ``source_id`` (its ``artifact_name``)."""

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        """Return the run ids, filtered by ``kwargs`` (``parent_run_id``)."""

    def metadata(self, run_id: str) -> Mapping[str, object]:
        """Return the metadata of ``run_id``."""

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        """Return the artifacts of ``run_id`` by name."""

    def sources(self, run_id: str, artifact_name: str | None = None) -> Iterable[TrackerSource]:
        """Return the sources of ``run_id``, only those of ``artifact_name`` when given."""


def _load_path(path: str) -> object | None:
    """What ``module.path:attr`` names; ``None`` when it does not import."""
    try:
        found: object = pkgutil.resolve_name(path)
    except (ImportError, AttributeError, ValueError):
        return None
    return found


def build_trackers(configured: Mapping[str, str | None]) -> list[TrackerBase]:
    """Create the trackers ``configured`` names (:func:`get_configured_trackers`).

    As ``torchx.tracker.api.build_trackers``: a name is a plugin, a ``torchx.tracker``
    entry point, a built-in, or a ``module.path:factory`` path; else it is skipped, logged.

    Args:
        configured: ``{tracker name: config or None}``.

    Raises:
        Exception: whatever a tracker's factory raises.
    """
    plugins = registry().get(PluginType.TRACKER)
    by_name = {ep.name: ep for ep in entry_points(TRACKER_ENTRY_POINT_GROUP)}
    trackers: list[TrackerBase] = []
    for name, config in configured.items():
        entry_point = by_name.get(name)
        path = _BUILTIN_TRACKERS.get(name, name)
        factory = plugins.get(name) or (
            entry_point.load() if entry_point is not None else _load_path(path)
        )
        if not callable(factory):
            why = (
                "the built-in tracker needs `pip install 'asynctorchx[tracker]'`"
                if name in _BUILTIN_TRACKERS
                else f"it is neither a {TRACKER_ENTRY_POINT_GROUP!r} entry point nor a"
                " `module.path:factory` path"
            )
            logger.warning("no tracker factory %r: %s; skipped", name, why)
            continue
        trackers.append(factory(config))
    return trackers


def trackers_from_environ() -> list[TrackerBase]:
    """Build the trackers ``$TORCHX_TRACKERS`` names, each with its
    ``$TORCHX_TRACKER_<NAME>_CONFIG`` (``torchx.tracker.api.trackers_from_environ``).

    Raises:
        Exception: whatever a tracker's factory raises.
    """
    if ENV_TORCHX_TRACKERS not in os.environ:
        return []
    return build_trackers(get_configured_trackers(sections={}))  # the variables alone


@dataclass(frozen=True)
class AppRunTrackableSource:
    """A run's source as :meth:`AppRun.sources` returns it
    (``torchx.tracker.api.AppRunTrackableSource``).

    Attributes:
        parent: the source run, writing to the same trackers.
        artifact_name: what of the source was consumed (``None``: the run as a whole).
    """

    parent: AppRun
    artifact_name: str | None


@dataclass(frozen=True)
class AppRun:
    """The run a training script records into: every call goes to each of ``backends``
    (``torchx.tracker.api.AppRun``).

    Attributes:
        id: the run id, the app handle in ``$TORCHX_JOB_ID`` in a job the Runner started.
        backends: the trackers written to.
    """

    id: str
    backends: Iterable[TrackerBase]

    @staticmethod
    @cache
    def run_from_env() -> AppRun:
        """Return the process's run, built once from ``$TORCHX_JOB_ID`` and the trackers'
        variables; ``$TORCHX_PARENT_RUN_ID`` is recorded as its source.

        Raises:
            Exception: whatever a tracker's factory or ``add_source`` raises.
        """
        run = AppRun(
            os.environ.get(ENV_TORCHX_JOB_ID, "<UNDEFINED>"), tuple(trackers_from_environ())
        )
        parent_run_id = os.environ.get(ENV_TORCHX_PARENT_RUN_ID)
        if parent_run_id is not None:
            run.add_source(parent_run_id)
        return run

    def add_metadata(self, **kwargs: object) -> None:
        """Record ``kwargs`` (JSON-serializable) as metadata of this run in every tracker."""
        for backend in self.backends:
            backend.add_metadata(self.id, **kwargs)

    def add_artifact(
        self, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        """Record the artifact ``name`` at ``path`` with ``metadata`` in every tracker."""
        for backend in self.backends:
            backend.add_artifact(self.id, name, path, metadata)

    def job_id(self) -> str:
        """Return the run id (:attr:`id`)."""
        return self.id

    def add_source(self, source_id: str, artifact_name: str | None = None) -> None:
        """Record in every tracker that this run consumed ``source_id`` (or its artifact)."""
        for backend in self.backends:
            backend.add_source(self.id, source_id, artifact_name)

    def sources(self) -> list[AppRunTrackableSource]:
        """Return this run's sources as the first tracker records them."""
        first = next(iter(self.backends), None)
        if first is None:
            return []
        return [
            AppRunTrackableSource(AppRun(s.source_run_id, self.backends), s.artifact_name)
            for s in first.sources(self.id)
        ]


__all__ = [
    "ENV_TORCHX_JOB_ID",
    "ENV_TORCHX_PARENT_RUN_ID",
    "ENV_TORCHX_TRACKERS",
    "TRACKER_ENTRY_POINT_GROUP",
    "AppRun",
    "AppRunTrackableSource",
    "TrackerArtifact",
    "TrackerBase",
    "TrackerSource",
    "build_trackers",
    "get_configured_trackers",
    "tracker_config_env_var_name",
    "trackers_from_environ",
]
