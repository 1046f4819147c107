"""Metrics components: ``metrics.tensorboard``, a TensorBoard server over a job's logs.

Name, arguments and command line are TorchX 0.7.0's (``torchx.components.metrics``).
The server runs under TorchX's process monitor, the module
``torchx.apps.utils.process_monitor`` that the TorchX image (the default ``image``)
ships: it starts TensorBoard when ``start_on_file`` appears, stops it when
``exit_on_file`` appears or after ``timeout`` seconds. With another image (or on
``local_cwd``), that image (or this Python) needs ``torchx`` and ``tensorboard``
installed.

    asynctorchx run -s local_docker metrics.tensorboard --logdir s3://bucket/run1/tb
"""

from __future__ import annotations

from asynctorchx.components import IMAGE
from asynctorchx.specs.api import AppDef, Role

#: The process monitor of TorchX's image that runs the server (a module of ``torchx``).
PROCESS_MONITOR: str = "torchx.apps.utils.process_monitor"


def tensorboard(
    logdir: str,
    image: str = IMAGE,
    timeout: float = 60 * 60,
    port: int = 6006,
    start_on_file: str = "",
    exit_on_file: str = "",
) -> AppDef:
    """Runs a TensorBoard server that renders the logs in ``logdir``.

    TensorBoard is a service: it ends after ``timeout`` seconds, or earlier when the
    ``exit_on_file`` path is created. The paths are fsspec paths, polled for existence.

    Args:
        logdir: fsspec path to the TensorBoard logs
        image: image to use
        timeout: maximum time to run before exiting (seconds)
        port: the port TensorBoard serves on (named ``http`` in the role's port map)
        start_on_file: start the server when the fsspec path is created
        exit_on_file: shutdown the server when the fsspec path is created
    """
    monitor = ["-m", PROCESS_MONITOR, "--timeout", str(timeout)]
    monitor += ["--start_on_file", start_on_file, "--exit_on_file", exit_on_file]
    server = ["tensorboard", "--bind_all", "--port", str(port), "--logdir", logdir]
    role = Role(
        name="tensorboard",
        image=image,
        entrypoint="python",
        args=[*monitor, "--", *server],
        port_map={"http": port},
    )
    return AppDef(name="tensorboard", roles=[role])
