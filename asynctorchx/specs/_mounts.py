"""Mounts and :func:`parse_mounts` (``torchx.specs.api``; Docker's ``--mount`` syntax)."""

from __future__ import annotations

import enum
import os
from typing import Union

import attrs

from asynctorchx.errors import MountOptionError


class MountType(str, enum.Enum):
    """The kinds of mount a role may ask for."""

    BIND = "bind"
    VOLUME = "volume"
    DEVICE = "device"


@attrs.define
class BindMount:
    """Mount host path ``src_path`` at ``dst_path`` in the replica."""

    src_path: str
    dst_path: str
    read_only: bool = False


@attrs.define
class VolumeMount:
    """Mount the volume named ``src`` at ``dst_path`` in the replica."""

    src: str
    dst_path: str
    read_only: bool = False


@attrs.define
class DeviceMount:
    """Expose host device ``src_path`` at ``dst_path``; ``permissions`` combines r, w, m."""

    src_path: str
    dst_path: str
    permissions: str = "rwm"


Mount = Union[BindMount, VolumeMount, DeviceMount]

_MOUNT_KEYS = {
    "type": "type",
    "src": "src",
    "source": "src",
    "dst": "dst",
    "destination": "dst",
    "target": "dst",
    "readonly": "readonly",
    "read_only": "readonly",
    "perm": "perm",
    "permissions": "perm",
}


def parse_mounts(opts: list[str]) -> list[Mount]:
    """Parse Docker-style mount options, e.g. ``["type=bind,src=/data,dst=/data,readonly"]``.

    Raises:
        MountOptionError: (a ``KeyError``) an item before ``type=``, an unknown key, no src/dst.
        ValueError: an unknown mount type or bad device permissions.
    """
    return [_mount_of(group) for group in _group_mount_options(opts)]


def _group_mount_options(opts: list[str]) -> list[dict[str, str]]:
    items = [item.strip() for opt in opts for item in opt.split(",") if item.strip()]
    groups: list[dict[str, str]] = []
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if key not in _MOUNT_KEYS:
            raise MountOptionError(
                f"unknown mount option {key}, must be one of {list(_MOUNT_KEYS)}: {item!r}"
                " is not one; use type, src, dst, readonly or perm"
            )
        canonical = _MOUNT_KEYS[key]
        if canonical == "type":
            groups.append({"type": value.strip()})
            continue
        if not groups:
            raise MountOptionError(
                f"type must be specified first: mount option {item!r} comes before any"
                " `type=`; start each mount with type=bind, type=volume or type=device"
            )
        groups[-1][canonical] = value.strip() if sep else "true"
    return groups


def _mount_of(group: dict[str, str]) -> Mount:
    kind = group["type"]
    valid = [member.value for member in MountType]
    if kind not in valid:  # before the other keys, as TorchX checks it
        raise ValueError(
            f"invalid mount type {kind!r}, must be one of {valid}: use bind, volume or device"
        )
    if "src" not in group:
        raise MountOptionError(f"mount {group} has no `src=`: say what to mount")
    if kind == MountType.DEVICE.value:
        perm = group.get("perm", "rwm")
        wrong = sorted(set(perm) - set("rwm"))
        if not perm or wrong:
            flag = wrong[0] if wrong else "''"
            raise ValueError(
                f"{flag} is not a valid permission flags must one of r,w,m: device"
                f" permissions {perm!r} must combine r, w and m (e.g. perm=rw)"
            )
        return DeviceMount(group["src"], group.get("dst", group["src"]), perm)
    if "dst" not in group:
        raise MountOptionError(f"{kind} mount {group} has no `dst=`: say where to mount it")
    read_only = group.get("readonly", "false").lower() in ("true", "1", "yes", "")
    if kind == MountType.VOLUME.value:
        return VolumeMount(group["src"], group["dst"], read_only)
    return BindMount(os.path.expanduser(group["src"]), group["dst"], read_only)
