"""The ``fsspec`` tracker, at TorchX's import path ``torchx.tracker.backend.fsspec``.

Needs the ``tracker`` extra. The layout is TorchX's, so either reads what the other wrote;
a record file is named ``<time_ns>_<random hex>`` so that replicas never replace each other's.
"""

from __future__ import annotations

import json
import posixpath
import time
import uuid
from base64 import b32decode, b32encode
from collections.abc import Mapping
from typing import Any

import fsspec

from asynctorchx.errors import ConfigError
from asynctorchx.tracker.api import TrackerArtifact, TrackerSource


def _encode(run_id: str) -> str:
    """A run id as a file name: base32, case-free and without ``/``."""
    return b32encode(run_id.encode()).decode()


def _decode(name: str) -> str:
    return b32decode(name).decode()


class FsspecTracker:
    """A tracker keeping every run under ``root_dir`` of the filesystem ``fs``
    (``torchx.tracker.backend.fsspec.FsspecTracker``).

    Args:
        fs (fsspec.AbstractFileSystem): the filesystem.
        root_dir (str): the directory holding the runs; it must exist.

    Raises:
        ConfigError: ``root_dir`` does not exist on ``fs``.
    """

    def __init__(self, fs: fsspec.AbstractFileSystem, root_dir: str) -> None:
        if not fs.exists(root_dir):
            raise ConfigError(
                f"the fsspec tracker directory {root_dir!r} does not exist: create it, or"
                " set root_path in the tracker config to an existing directory"
            )
        self.fs = fs
        self.root_dir = root_dir

    def _dir(self, run_id: str, *parts: str) -> str:
        return posixpath.join(self.root_dir, _encode(run_id), *parts)

    def _persist(self, run_id: str, category: str, entry: Mapping[str, object]) -> None:
        directory = self._dir(run_id, category)
        self.fs.mkdirs(directory, exist_ok=True)
        name = f"{time.time_ns()}_{uuid.uuid4().hex}"
        self.fs.pipe_file(posixpath.join(directory, name), json.dumps(entry).encode())

    def _load(self, run_id: str, category: str) -> list[dict[str, Any]]:
        directory = self._dir(run_id, category)
        if not self.fs.exists(directory):
            return []
        paths = sorted(self.fs.ls(directory, detail=False), key=posixpath.basename)
        return [json.loads(self.fs.cat_file(path)) for path in paths]

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        """Record ``kwargs`` (JSON-serializable) as metadata of ``run_id``.

        Raises:
            TypeError: a value is not JSON-serializable.
        """
        self._persist(run_id, "metadata", {"metadata": kwargs})

    def metadata(self, run_id: str) -> dict[str, object]:
        """Return the metadata of ``run_id``, a later call's key replacing an earlier's."""
        entries = self._load(run_id, "metadata")
        return {key: value for entry in entries for key, value in entry["metadata"].items()}

    def add_artifact(
        self, run_id: str, name: str, path: str, metadata: Mapping[str, object] | None = None
    ) -> None:
        """Record the artifact ``name`` at ``path`` of ``run_id``.

        Raises:
            TypeError: ``metadata`` is not JSON-serializable.
        """
        self._persist(run_id, "artifacts", {"name": name, "path": path, "metadata": metadata})

    def artifacts(self, run_id: str) -> dict[str, TrackerArtifact]:
        """Return the artifacts of ``run_id`` by name, a later one replacing an earlier."""
        return {
            str(e["name"]): TrackerArtifact(str(e["name"]), str(e["path"]), e["metadata"])
            for e in self._load(run_id, "artifacts")
        }

    def _append_once(self, directory: str, run_id: str, line: str) -> None:
        """Append ``line`` to ``run_id``'s file in ``directory`` unless the file has it."""
        self.fs.mkdirs(directory, exist_ok=True)
        path = posixpath.join(directory, _encode(run_id))
        if self.fs.exists(path):
            with self.fs.open(path, "r") as f:
                if line in (existing.strip() for existing in f):
                    return
        with self.fs.open(path, "a") as f:
            f.write(f"{line}\n")

    def add_source(self, run_id: str, source_id: str, artifact_name: str | None = None) -> None:
        """Record once that ``run_id`` consumed ``source_id`` (its ``artifact_name``, or all)."""
        line = artifact_name or ""
        self._append_once(self._dir(run_id, "sources"), source_id, line)
        if self.fs.exists(self._dir(source_id)):
            self._append_once(self._dir(source_id, "descendants"), run_id, line)

    def sources(self, run_id: str, artifact_name: str | None = None) -> list[TrackerSource]:
        """Return the sources of ``run_id``; with ``artifact_name``, only those naming it."""
        directory = self._dir(run_id, "sources")
        if not self.fs.exists(directory):
            return []
        found = []
        for path in sorted(self.fs.ls(directory, detail=False)):
            source_run_id = _decode(posixpath.basename(path))
            with self.fs.open(path, "r") as f:
                names = [line.strip() for line in f if line.strip()]
            if not names and artifact_name is None:
                found.append(TrackerSource(source_run_id, None))
            found += [TrackerSource(source_run_id, n) for n in names if artifact_name in (None, n)]
        return found

    def run_ids(self, parent_run_id: str | None = None) -> list[str]:
        """Return the ids of the runs held, only those with the source ``parent_run_id``."""
        if not self.fs.exists(self.root_dir):
            return []
        source = posixpath.join("sources", _encode(parent_run_id)) if parent_run_id else None
        return [
            _decode(posixpath.basename(entry["name"]))
            for entry in self.fs.ls(self.root_dir, detail=True)
            if entry["type"] == "directory"
            and (source is None or self.fs.exists(posixpath.join(entry["name"], source)))
        ]

    def __repr__(self) -> str:
        return f"<FsspecTracker: root_path={self.root_dir}>"


def _read_config(config_file: str) -> dict[str, Any]:
    """``key = value`` lines (``#`` starts a comment line); a dotted key nests."""
    config: dict[str, Any] = {}
    with fsspec.open(config_file, "rt") as f:
        for line in f:
            key, sep, value = line.partition("=")
            if line.startswith("#") or not (key.strip() and sep and value.strip()):
                continue
            *parents, leaf = key.strip().split(".")
            if not leaf or not all(parents):
                raise ConfigError(
                    f"bad key {key.strip()!r} in the tracker config {config_file}:"
                    " write `name = value` or `outer.inner = value`"
                )
            nested = config
            for parent in parents:
                nested = nested.setdefault(parent, {})
            nested[leaf] = value.strip()
    return config


def create(config: str | None) -> FsspecTracker:
    """Build the tracker from the config file ``config``: the ``fsspec`` entry of the
    ``torchx.tracker`` group (``torchx.tracker.backend.fsspec.create``).

    ``key = value`` lines: ``protocol`` and ``root_path`` are required; the other keys (dotted
    ones nest) go to ``fsspec.filesystem(protocol, ...)``.

    Args:
        config: the config file's path or URL (``$TORCHX_TRACKER_<NAME>_CONFIG``).

    Raises:
        ConfigError: no config, a malformed key, no ``protocol`` or ``root_path``, or no such root.
        FileNotFoundError: the config file does not exist.
    """
    if not config:
        raise ConfigError(
            "the fsspec tracker needs a config file: set `config = <file>` in"
            " [tracker:<name>] or $TORCHX_TRACKER_<NAME>_CONFIG"
        )
    options = _read_config(config)
    missing = [key for key in ("protocol", "root_path") if key not in options]
    if missing:
        raise ConfigError(f"the tracker config {config} lacks {missing}: add `key = value` lines")
    protocol, root = options.pop("protocol"), options.pop("root_path")
    return FsspecTracker(fsspec.filesystem(protocol, **options), root)


__all__ = ["FsspecTracker", "create"]
