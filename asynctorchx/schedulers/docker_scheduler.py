"""``local_docker``: run each replica of an app as a Docker container (TorchX's import path).

TorchX code imports ``torchx.schedulers.docker_scheduler``; this module keeps that path
and is the one public import path of ``local_docker``'s names, with TorchX's
``make_unique`` (the app-id generator) and the typed run options ``Opts``
(torchx-nightly's; ``DockerOpts`` is TorchX 0.7.0's ``TypedDict`` of them). The
scheduler lives in the subpackage :mod:`asynctorchx.schedulers.docker`, one private
module per concern (the engine, the request, the state tables, watch, logs, network,
workspace); its docstring lists them, and :mod:`asynctorchx.schedulers.docker._scheduler`
documents where ``local_docker`` differs from TorchX 0.7.0's ``torchx.schedulers.docker_scheduler``.
"""

from __future__ import annotations

from asynctorchx.schedulers.docker._engine import has_docker
from asynctorchx.schedulers.docker._options import NETWORK, DockerOpts, Opts
from asynctorchx.schedulers.docker._request import (
    LABEL_APP_DEF,
    LABEL_APP_ID,
    LABEL_CANCELLED_AT,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    LABEL_VERSION,
    RANK0_ENV,
    DockerContainer,
    DockerJob,
    container_name,
)
from asynctorchx.schedulers.docker._scheduler import (
    DEFAULT_GRACE_S,
    DEFAULT_STOP_TIMEOUT,
    DockerScheduler,
    create_scheduler,
)
from asynctorchx.schedulers.ids import make_unique as make_unique

__all__ = [
    "DEFAULT_GRACE_S",
    "DEFAULT_STOP_TIMEOUT",
    "LABEL_APP_DEF",
    "LABEL_APP_ID",
    "LABEL_CANCELLED_AT",
    "LABEL_REPLICA_ID",
    "LABEL_ROLE_NAME",
    "LABEL_VERSION",
    "NETWORK",
    "RANK0_ENV",
    "DockerContainer",
    "DockerJob",
    "DockerOpts",
    "DockerScheduler",
    "Opts",
    "container_name",
    "create_scheduler",
    "has_docker",
    "make_unique",
]
