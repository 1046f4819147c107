"""Named resources for AWS EC2 instance types (``aws_<type>``), TorchX's table.

``memMB`` is in MiB after a 4% memory tax (``GiB = int(1024 * 0.96)``): ECS/EC2 reserve
some memory, and a job asking for all of it never leaves the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from asynctorchx.specs.api import Resource

#: Device name of an AWS Elastic Fabric Adapter.
EFA_DEVICE: str = "vpc.amazonaws.com/efa"
#: Device name of an AWS Neuron (Trainium/Inferentia) device.
NEURON_DEVICE: str = "aws.amazon.com/neurondevice"
#: Fraction of an instance's memory a job may ask for (ECS/EC2 memory tax).
MEM_TAX: float = 0.96
#: Capability key holding the EC2 instance type.
K8S_ITYPE: str = "node.kubernetes.io/instance-type"
#: MiB in one (taxed) GiB.
GiB: int = int(1024 * MEM_TAX)

# instance type -> (vCPUs, GPUs, memory in GiB, EFA devices, Neuron devices)
_TABLE: dict[str, tuple[int, int, int, int, int]] = {
    "t3.medium": (2, 0, 4, 0, 0),
    "m5.2xlarge": (8, 0, 32, 0, 0),
    "p3.2xlarge": (8, 1, 61, 0, 0),
    "p3.8xlarge": (32, 4, 244, 0, 0),
    "p3.16xlarge": (64, 8, 488, 0, 0),
    "p3dn.24xlarge": (96, 8, 768, 1, 0),
    "p4d.24xlarge": (96, 8, 1152, 4, 0),
    # same cpu/gpu/memory as p4d; twice the memory per GPU
    "p4de.24xlarge": (96, 8, 1152, 4, 0),
    "p5.48xlarge": (192, 8, 2048, 32, 0),
    "g4dn.xlarge": (4, 1, 16, 0, 0),
    "g4dn.2xlarge": (8, 1, 32, 0, 0),
    "g4dn.4xlarge": (16, 1, 64, 0, 0),
    "g4dn.8xlarge": (32, 1, 128, 1, 0),
    "g4dn.16xlarge": (64, 1, 256, 1, 0),
    "g4dn.12xlarge": (48, 4, 192, 1, 0),
    "g4dn.metal": (96, 8, 384, 1, 0),
    "g5.xlarge": (4, 1, 16, 0, 0),
    "g5.2xlarge": (8, 1, 32, 0, 0),
    "g5.4xlarge": (16, 1, 64, 0, 0),
    "g5.8xlarge": (32, 1, 128, 1, 0),
    "g5.16xlarge": (64, 1, 256, 1, 0),
    "g5.12xlarge": (48, 4, 192, 1, 0),
    "g5.24xlarge": (96, 4, 384, 1, 0),
    "g5.48xlarge": (192, 8, 768, 1, 0),
    "trn1.2xlarge": (8, 0, 32, 0, 1),
    "trn1.32xlarge": (128, 0, 512, 8, 16),
}


def _make(instance_type: str) -> Resource:
    cpu, gpu, mem_gib, efa, neuron = _TABLE[instance_type]
    devices = {device: n for device, n in ((EFA_DEVICE, efa), (NEURON_DEVICE, neuron)) if n}
    return Resource(
        cpu=cpu,
        gpu=gpu,
        memMB=mem_gib * GiB,
        capabilities={K8S_ITYPE: instance_type},
        devices=devices,
    )


#: ``aws_<instance type>`` to a function returning a fresh :class:`Resource` per call.
NAMED_RESOURCES: Mapping[str, Callable[[], Resource]] = {
    f"aws_{instance_type}": partial(_make, instance_type) for instance_type in _TABLE
}
# so code calling ``named_resources_aws.aws_p3_2xlarge()`` ports unchanged
_BY_FUNCTION_NAME = {name.replace(".", "_"): factory for name, factory in NAMED_RESOURCES.items()}


def __getattr__(name: str) -> Callable[[], Resource]:
    """TorchX's function per instance type, ``aws_p3_2xlarge`` for ``p3.2xlarge``."""
    factory = _BY_FUNCTION_NAME.get(name)
    if factory is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return factory


def __dir__() -> list[str]:
    return sorted([*globals(), *_BY_FUNCTION_NAME])


def instance_type_from_resource(resource: Resource) -> str | None:
    """Return the EC2 instance type recorded in ``resource.capabilities``, or ``None``."""
    value = resource.capabilities.get(K8S_ITYPE)
    return value if isinstance(value, str) else None
