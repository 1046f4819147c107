"""``metrics.tensorboard`` (``torchx.components.metrics``), run under TorchX's process monitor."""

from __future__ import annotations

from asynctorchx.components import IMAGE
from asynctorchx.specs.api import AppDef, Role

#: The process monitor in TorchX's image that runs the server.
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
