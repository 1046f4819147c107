"""The ``tracker`` command (TorchX's ``torchx.cli.cmd_tracker``): query the first tracker.

``tracker list lineage`` prints a job's sources, which TorchX leaves unimplemented.
"""

from __future__ import annotations

import argparse
import logging

from tabulate import tabulate

from asynctorchx.cli._output import UsageError
from asynctorchx.errors import ConfigError
from asynctorchx.tracker.api import TrackerBase, build_trackers, get_configured_trackers

logger = logging.getLogger(__name__)


def _tracker() -> TrackerBase:
    """The first configured tracker, as TorchX queries."""
    configured = get_configured_trackers()
    if not configured:
        raise ConfigError(
            "no tracker is configured: name one in the [torchx:tracker] section of the"
            " .torchxconfig (e.g. `fsspec =` and `[tracker:fsspec]` `config = <dir>`) or in"
            " $TORCHX_TRACKERS"
        )
    trackers = build_trackers(configured)
    if not trackers:
        raise ConfigError(
            f"none of the configured trackers ({', '.join(configured)}) could be built:"
            " each must be a `torchx.tracker` entry point or a `module.path:factory` path"
        )
    logger.info("using the tracker %r to query", trackers[0])
    return trackers[0]


def _jobs(tracker: TrackerBase, args: argparse.Namespace) -> list[list[object]]:
    filters = {"parent_run_id": args.parent_run_id} if args.parent_run_id else {}
    return [[run_id] for run_id in tracker.run_ids(**filters)]


def _metadata(tracker: TrackerBase, args: argparse.Namespace) -> list[list[object]]:
    return [[key, value] for key, value in tracker.metadata(args.RUN_ID).items()]


def _artifacts(tracker: TrackerBase, args: argparse.Namespace) -> list[list[object]]:
    artifacts = list(tracker.artifacts(args.RUN_ID).values())
    if args.artifact:
        artifacts = [a for a in artifacts if a.name == args.artifact]
    return [[a.name, a.path, a.metadata] for a in artifacts]


def _lineage(tracker: TrackerBase, args: argparse.Namespace) -> list[list[object]]:
    if args.descendants_only:
        raise UsageError(
            "--descendants-only: a tracker records each job's sources, not its"
            " descendants; run `tracker list lineage RUN_ID` on the later job instead"
        )
    sources = tracker.sources(args.RUN_ID, args.artifact)
    return [[s.source_run_id, s.artifact_name] for s in sources]


_TABLES = {
    "jobs": (_jobs, ["JOB ID"]),
    "metadata": (_metadata, ["ID", "VALUE"]),
    "artifacts": (_artifacts, ["ARTIFACT", "PATH", "METADATA"]),
    "lineage": (_lineage, ["SOURCE RUN ID", "ARTIFACT"]),
}


def tracker(args: argparse.Namespace) -> int:
    """Run ``tracker list <what>`` and print its table; return the exit code."""
    rows_of, headers = _TABLES[args.tracker_list]
    rows = rows_of(_tracker(), args)
    print(tabulate(rows, headers=headers))
    return 0


__all__ = ["tracker"]
