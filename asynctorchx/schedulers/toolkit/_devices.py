"""Named devices of a ``Resource`` mapped to host device files, shared by every backend.

TorchX's ``torchx.schedulers.devices`` keeps the same table: ``Resource.devices`` holds
``{device name: count}`` (for example ``{"vpc.amazonaws.com/efa": 4}`` from the
``aws_p4d.24xlarge`` named resource) and each count becomes that many numbered device
files, mounted at the same path in the replica.
"""

from __future__ import annotations

from collections.abc import Mapping

from asynctorchx.errors import UnknownDeviceError
from asynctorchx.specs.api import DeviceMount
from asynctorchx.specs.named_resources_aws import EFA_DEVICE, NEURON_DEVICE

#: Device name -> prefix of its numbered host device files (``prefix0``, ``prefix1``...).
DEVICES: Mapping[str, str] = {
    EFA_DEVICE: "/dev/infiniband/uverbs",
    NEURON_DEVICE: "/dev/neuron",
}


def get_device_mounts(devices: Mapping[str, int]) -> list[DeviceMount]:
    """Return the device mounts for ``Resource.devices``.

    A name in :data:`DEVICES` with count ``n`` gives ``n`` mounts of ``{prefix}0`` ..
    ``{prefix}{n-1}``; a name that is itself a ``/dev/`` path gives one mount of that
    path (whatever the count). Each mount has permissions ``rwm``.

    Args:
        devices: device name -> how many devices (``Resource.devices``).

    Raises:
        UnknownDeviceError: a name is neither known nor a ``/dev/`` path. TorchX only
            warns and drops it; a replica started without the device it asked for
            would fail later and less clearly.
        ValueError: a count is negative.
    """
    mounts: list[DeviceMount] = []
    for name, count in devices.items():
        if count < 0:
            raise ValueError(f"device {name!r} has count {count}: use 0 or more")
        prefix = DEVICES.get(name)
        if prefix is not None:
            mounts.extend(DeviceMount(f"{prefix}{i}", f"{prefix}{i}") for i in range(count))
        elif name.startswith("/dev/"):
            mounts.append(DeviceMount(name, name))
        else:
            raise UnknownDeviceError(
                f"resource device {name!r} has no known host device file: use one of"
                f" {sorted(DEVICES)} or a /dev/ path"
            )
    return mounts
