"""Structured arguments ``--name exp/run`` and ``-j NxM`` (``torchx.components.structured_arg``)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import attrs

from asynctorchx.specs import resource

#: The experiment name used when ``--name`` gives none.
DEFAULT_EXPERIMENT_NAME: str = "default-experiment"


@attrs.define
class StructuredNameArgument:
    """An ``{experiment_name}/{run_name}`` pair parsed from ``--name``."""

    experiment_name: str
    run_name: str

    def __str__(self) -> str:
        return f"{self.experiment_name}/{self.run_name}"

    @staticmethod
    def parse_from(
        name: str,
        m: str | None = None,
        script: str | None = None,
        default_experiment_name: str = DEFAULT_EXPERIMENT_NAME,
    ) -> StructuredNameArgument:
        """Parse ``name`` (``exp/run``, ``exp/``, ``/run``, ``run``); no run: named after m/script.

        Raises:
            ValueError: not exactly one of ``m`` and ``script`` is given.
        """
        if not m and not script:
            raise ValueError(
                "No main module or script specified: give exactly one of the main module"
                " (-m) and the script path (--script)"
            )
        if m and script:
            raise ValueError(
                f"Both main module and script set (m={m!r}, script={script!r}): give"
                " exactly one of the main module (-m) and the script path (--script)"
            )
        experiment, sep, run = name.partition("/")
        if not sep:
            experiment, run = "", name
        if not run:
            run = m.rpartition(".")[2] if m else Path(str(script)).stem
        return StructuredNameArgument(experiment or default_experiment_name, run)


@attrs.define
class StructuredJArgument:
    """Nodes and processes per node parsed from ``-j``."""

    nnodes: int
    nproc_per_node: int

    def __str__(self) -> str:
        return f"{self.nnodes}x{self.nproc_per_node}"

    @staticmethod
    def parse_from(h: str, j: str) -> StructuredJArgument:
        """Parse ``j`` (``NNODES``: one process per GPU of ``h``, or ``NNODESxNPROC``).

        Raises:
            ValueError: ``j`` is malformed, or gives no count for a host without GPUs.
            UnknownNamedResourceException: ``h`` is not a registered named resource.
        """
        match = re.fullmatch(r"(\d+)(?:x(\d+))?", j.strip())
        if match is None:
            raise ValueError(
                f"Invalid format for `-j $NNODESx$NPROCS_PER_NODE` (e.g. `-j 1x8`). Given: {j}"
            )
        gpus = resource(h=h).gpu
        nnodes = int(match.group(1))
        if match.group(2) is None:
            if gpus <= 0:
                raise ValueError(
                    f"nproc_per_node cannot be inferred from GPU count. `{h}` is not a GPU"
                    f" instance (it has no GPU). You must specify"
                    f" `-j {nnodes}xNPROC_PER_NODE` (e.g. `-j {nnodes}x8`)"
                )
            return StructuredJArgument(nnodes, gpus)
        nproc = int(match.group(2))
        if nproc != gpus:
            warnings.warn(
                f"In `-j {j}` you specified nproc_per_node={nproc} which does not equal the"
                f" number of GPUs on a {h}: {gpus} (a {h} has {gpus} GPUs). If this is not"
                f" intended write `-j {nnodes}` to use one process per GPU",
                stacklevel=2,
            )
        return StructuredJArgument(nnodes, nproc)
