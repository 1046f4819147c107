"""The ``local_cwd`` and ``local_dir`` schedulers, at TorchX's import path.

TorchX's module is ``torchx.schedulers.local_scheduler``; this one keeps that path (and
the scheduler registry's ``asynctorchx.schedulers.local_scheduler:create_cwd_scheduler``
and ``:create_dir_scheduler``) working. The code now lives in the subpackage
:mod:`asynctorchx.schedulers.local`, which documents the schedulers; this module is the
one public import path of their names, with TorchX's module-level names ``make_unique``
and ``ENV_CUDA_VISIBLE_DEVICES``.
"""

from asynctorchx.schedulers.ids import make_unique as make_unique
from asynctorchx.schedulers.local._factories import (
    create_cwd_scheduler,
    create_dir_scheduler,
    create_scheduler,
)
from asynctorchx.schedulers.local._request import (
    DEFAULT_STOP_TIMEOUT,
    ENV_CUDA_VISIBLE_DEVICES,
    CWDImageProvider,
    ImageProvider,
    LocalDirectoryImageProvider,
    LocalOpts,
    PopenRequest,
    ReplicaParam,
)
from asynctorchx.schedulers.local._scheduler import LocalScheduler

__all__ = [
    "DEFAULT_STOP_TIMEOUT",
    "ENV_CUDA_VISIBLE_DEVICES",
    "CWDImageProvider",
    "ImageProvider",
    "LocalDirectoryImageProvider",
    "LocalOpts",
    "LocalScheduler",
    "PopenRequest",
    "ReplicaParam",
    "create_cwd_scheduler",
    "create_dir_scheduler",
    "create_scheduler",
]
