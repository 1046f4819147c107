"""``local_cwd`` and ``local_dir`` at TorchX's path, ``torchx.schedulers.local_scheduler``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from asynctorchx.schedulers.ids import make_unique as make_unique
from asynctorchx.schedulers.local._request import (
    DEFAULT_STOP_TIMEOUT,
    ENV_CUDA_VISIBLE_DEVICES,
    CWDImageProvider,
    ImageProvider,
    LocalDirectoryImageProvider,
    LocalOpts,
    Opts,
    PopenRequest,
    ReplicaParam,
)
from asynctorchx.schedulers.local._scheduler import LocalScheduler
from asynctorchx.specs.api import CfgVal


def create_cwd_scheduler(
    session_name: str,
    cache_size: int = 100,
    extra_paths: list[str] | None = None,
    **kwargs: Any,
) -> LocalScheduler:
    """Create the ``local_cwd`` scheduler: replicas run in the current directory.

    Args:
        session_name: the runner session.
        cache_size: how many finished apps are kept (see :class:`LocalScheduler`).
        extra_paths: directories put in front of every replica's ``PATH``.
        **kwargs: ignored (the runner passes every ``TORCHX_*`` parameter, as TorchX does).
    """
    return create_scheduler(session_name, cache_size, extra_paths)


def create_dir_scheduler(
    session_name: str,
    cache_size: int = 100,
    extra_paths: list[str] | None = None,
    **kwargs: Any,
) -> LocalScheduler:
    """Create the ``local_dir`` scheduler: a role's image is an absolute directory to run in.

    The arguments are :func:`create_cwd_scheduler`'s.
    """
    return create_scheduler(session_name, cache_size, extra_paths, LocalDirectoryImageProvider)


def create_scheduler(
    session_name: str,
    cache_size: int = 100,
    extra_paths: list[str] | None = None,
    image_provider_class: Callable[[Mapping[str, CfgVal]], ImageProvider] = CWDImageProvider,
    **kwargs: Any,
) -> LocalScheduler:
    """Create a local scheduler, as TorchX's ``local_scheduler.create_scheduler``.

    The backend is ``local_dir`` for a :class:`LocalDirectoryImageProvider`, else ``local_cwd``.

    Args:
        session_name: the runner session.
        cache_size: how many finished apps are kept; a string is read as an integer.
        extra_paths: directories put in front of every replica's ``PATH``.
        image_provider_class: builds the image provider from the run config.
        **kwargs: ignored, as TorchX ignores them.

    Raises:
        ValueError: ``cache_size`` is not positive.
    """
    is_dir = isinstance(image_provider_class, type) and issubclass(
        image_provider_class, LocalDirectoryImageProvider
    )
    return LocalScheduler(
        session_name,
        image_provider_class=image_provider_class,
        cache_size=int(cache_size),
        extra_paths=extra_paths,
        backend="local_dir" if is_dir else "local_cwd",
    )


__all__ = [
    "DEFAULT_STOP_TIMEOUT",
    "ENV_CUDA_VISIBLE_DEVICES",
    "CWDImageProvider",
    "ImageProvider",
    "LocalDirectoryImageProvider",
    "LocalOpts",
    "LocalScheduler",
    "Opts",
    "PopenRequest",
    "ReplicaParam",
    "create_cwd_scheduler",
    "create_dir_scheduler",
    "create_scheduler",
]
