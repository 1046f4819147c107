"""The factories of the local schedulers: ``local_cwd``, ``local_dir`` and TorchX's one.

``create_cwd_scheduler`` and ``create_dir_scheduler`` are the registry's factories;
``create_scheduler`` has the signature of TorchX's
``torchx.schedulers.local_scheduler.create_scheduler``. Each makes a
:class:`~asynctorchx.schedulers.local._scheduler.LocalScheduler`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from asynctorchx.schedulers.local._request import (
    CWDImageProvider,
    ImageProvider,
    LocalDirectoryImageProvider,
)
from asynctorchx.schedulers.local._scheduler import LocalScheduler
from asynctorchx.specs.api import CfgVal


def create_cwd_scheduler(session_name: str, **kwargs: Any) -> LocalScheduler:
    """Create the ``local_cwd`` scheduler: replicas run in the current directory.

    Args:
        session_name: the runner session.
        **kwargs: ``cache_size`` and ``extra_paths`` go to :class:`LocalScheduler`; the
            others are ignored (the runner passes every ``TORCHX_*`` parameter to every
            factory, as TorchX does).
    """
    return create_scheduler(session_name, **_known(kwargs))


def create_dir_scheduler(session_name: str, **kwargs: Any) -> LocalScheduler:
    """Create the ``local_dir`` scheduler: a role's image is an absolute directory to run in.

    Args:
        session_name: the runner session.
        **kwargs: as :func:`create_cwd_scheduler`.
    """
    return create_scheduler(
        session_name, image_provider_class=LocalDirectoryImageProvider, **_known(kwargs)
    )


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


def _known(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {key: kwargs[key] for key in ("cache_size", "extra_paths") if key in kwargs}


__all__ = [
    "create_cwd_scheduler",
    "create_dir_scheduler",
    "create_scheduler",
]
