"""Structured component arguments: one friendly string that carries several values.

* ``--name {experiment}/{run}`` (:class:`StructuredNameArgument`): the experiment and
  run names used for tracking;
* ``-j {nnodes}x{nproc_per_node}`` (:class:`StructuredJArgument`): nodes and processes
  per node, with ``nproc_per_node`` inferred from the host's GPU count when omitted.

Semantics of ``torchx.components.structured_arg`` (TorchX 0.7.0).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import attrs

from asynctorchx.specs import get_named_resources

#: The experiment name used when ``--name`` gives none.
DEFAULT_EXPERIMENT_NAME: str = "default-experiment"


@attrs.define
class StructuredNameArgument:
    """An ``{experiment_name}/{run_name}`` pair parsed from ``--name``.

    Args:
        experiment_name: groups runs for an experiment tracker.
        run_name: the run's (and the app's) name.
    """

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
        """Parse ``name`` (``exp/run``, ``exp/``, ``/run``, ``run`` or ``/``).

        An empty experiment name becomes ``default_experiment_name``; an empty run name
        is derived from the main module's last part (``m="a.b.train"`` -> ``train``) or
        the script's stem (``script="x/train.py"`` -> ``train``).

        Raises:
            ValueError: not exactly one of ``m`` and ``script`` is given.
        """
        if bool(m) == bool(script):
            raise ValueError(
                "exactly one of the main module (-m) and the script (--script) must be"
                f" given, got m={m!r} and script={script!r}"
            )
        experiment, sep, run = name.partition("/")
        if not sep:
            experiment, run = "", name
        if not run:
            run = m.rpartition(".")[2] if m else Path(str(script)).stem
        return StructuredNameArgument(experiment or default_experiment_name, run)


@attrs.define
class StructuredJArgument:
    """Nodes and processes per node parsed from ``-j``.

    Args:
        nnodes: number of nodes (hosts).
        nproc_per_node: number of processes on each node.
    """

    nnodes: int
    nproc_per_node: int

    def __str__(self) -> str:
        return f"{self.nnodes}x{self.nproc_per_node}"

    @staticmethod
    def parse_from(h: str, j: str) -> StructuredJArgument:
        """Parse ``j`` (``NNODES`` or ``NNODESxNPROC_PER_NODE``) for hosts of type ``h``.

        With ``j="2"`` the processes per node are the GPU count of the named resource
        ``h``. An explicit count that differs from the GPU count is honoured, with a
        :class:`UserWarning`.

        Raises:
            ValueError: ``j`` is malformed, or gives no process count for a host
                without GPUs.
            UnknownNamedResourceException: ``h`` is not a registered named resource.
        """
        match = re.fullmatch(r"(\d+)(?:x(\d+))?", j.strip())
        if match is None:
            raise ValueError(
                f"-j {j!r} is not NNODES or NNODESxNPROC_PER_NODE: write e.g. `-j 2x8` or `-j 2`"
            )
        gpus = get_named_resources(h).gpu
        nnodes = int(match.group(1))
        if match.group(2) is None:
            if gpus <= 0:
                raise ValueError(
                    f"cannot infer the processes per node from `{h}`: it has no GPU; write"
                    f" `-j {nnodes}xNPROC_PER_NODE` (e.g. `-j {nnodes}x8`)"
                )
            return StructuredJArgument(nnodes, gpus)
        nproc = int(match.group(2))
        if nproc != gpus:
            warnings.warn(
                f"-j {j} runs {nproc} processes per node but a {h} has {gpus} GPUs; if"
                f" this is not intended write `-j {nnodes}` to use one process per GPU",
                stacklevel=2,
            )
        return StructuredJArgument(nnodes, nproc)
