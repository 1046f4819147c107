"""``Resource.devices`` mapped to host device files (TorchX's ``torchx.schedulers.devices``)."""

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
    """Return ``rwm`` mounts: ``{prefix}0..{n-1}`` per :data:`DEVICES` name, a ``/dev/`` path as is.

    Raises:
        UnknownDeviceError: a name is neither known nor a ``/dev/`` path (TorchX only warns).
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
