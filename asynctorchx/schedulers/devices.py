"""Device mounts of named devices, at TorchX's import path ``torchx.schedulers.devices``.

The table lives in :mod:`asynctorchx.schedulers.toolkit`.
"""

from asynctorchx.schedulers.toolkit import DEVICES, get_device_mounts

__all__ = ["DEVICES", "get_device_mounts"]
