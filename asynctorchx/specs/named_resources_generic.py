"""Generic named resources ``cpu.*`` and ``gpu.*``: TorchX's set, ``memMB`` in MiB."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from asynctorchx.specs.api import Resource

#: MiB in one GiB.
GiB: int = 1024

# name -> (cpu, gpu, memMB); the same figures as TorchX 0.7.0.
_TABLE: dict[str, tuple[int, int, int]] = {
    "gpu.small": (8, 1, 32 * GiB),
    "gpu.medium": (16, 2, 64 * GiB),
    "gpu.large": (32, 4, 128 * GiB),
    "gpu.xlarge": (64, 8, 256 * GiB),
    "cpu.nano": (1, 0, 512),
    "cpu.micro": (1, 0, 1 * GiB),
    "cpu.small": (1, 0, 2 * GiB),
    "cpu.medium": (2, 0, 4 * GiB),
    "cpu.large": (2, 0, 8 * GiB),
    "cpu.xlarge": (8, 0, 32 * GiB),
}


#: Name to a factory returning a fresh :class:`Resource` on each call.
NAMED_RESOURCES: Mapping[str, Callable[[], Resource]] = {
    name: partial(Resource, cpu=cpu, gpu=gpu, memMB=mem_mb)
    for name, (cpu, gpu, mem_mb) in _TABLE.items()
}
