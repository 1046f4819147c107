"""The ``local_cwd`` and ``local_dir`` schedulers, at TorchX's import path.

TorchX's module is ``torchx.schedulers.local_scheduler``; this one keeps that path, the
scheduler registry's factories ``create_cwd_scheduler`` and ``create_dir_scheduler``,
TorchX's ``create_scheduler``, TorchX's module-level names ``make_unique`` and
``ENV_CUDA_VISIBLE_DEVICES``, and the typed run options ``Opts`` (torchx-nightly's;
``LocalOpts`` is TorchX 0.7.0's ``TypedDict`` of them). The scheduler itself lives in the subpackage
:mod:`asynctorchx.schedulers.local`, which documents it; this module is the one public
import path of its names.
"""

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
        **kwargs: ignored (the runner passes every ``TORCHX_*`` parameter to every
            factory, as TorchX does).
    """
    return create_scheduler(session_name, cache_size, extra_paths)


def create_dir_scheduler(
    session_name: str,
    cache_size: int = 100,
    extra_paths: list[str] | None = None,
    **kwargs: Any,
) -> LocalScheduler:
    """Create the ``local_dir`` scheduler: a role's image is an absolute directory to run in.

    Args:
        session_name: the runner session.
        cache_size: as :func:`create_cwd_scheduler`.
        extra_paths: as :func:`create_cwd_scheduler`.
        **kwargs: as :func:`create_cwd_scheduler`.
    """
    return create_scheduler(session_name, cache_size, extra_paths, LocalDirectoryImageProvider)


def create_scheduler(
    session_name: str,
    cache_size: int = 100,
    extra_paths: list[str] | None = None,
    image_provider_class: Callable[[Mapping[str, CfgVal]], ImageProvider] = CWDImageProvider,
    **kwargs: Any,
) -> LocalScheduler:
    """Create a local scheduler; TorchX's ``torchx.schedulers.local_scheduler.create_scheduler``.

    The same signature as TorchX's: the image provider decides the backend,
    ``local_dir`` for :class:`LocalDirectoryImageProvider` (and its subclasses),
    ``local_cwd`` otherwise (TorchX names every one ``local``).

    Args:
        session_name: the runner session.
        cache_size: how many finished apps are kept (see :class:`LocalScheduler`); a
            string (a ``TORCHX_CACHE_SIZE`` parameter) is read as an integer.
        extra_paths: directories put in front of every replica's ``PATH``.
        image_provider_class: builds the image provider from the run config (default
            :class:`CWDImageProvider`, as TorchX's).
        **kwargs: ignored, as TorchX ignores them (the runner passes every ``TORCHX_*``
            parameter to every factory).

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
