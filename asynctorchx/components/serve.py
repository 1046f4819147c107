"""``serve.torchserve`` (``torchx.components.serve``): TorchX's ``torchx.apps.serve.serve``."""

from __future__ import annotations

from asynctorchx.components import IMAGE
from asynctorchx.specs.api import AppDef, Resource, Role

#: TorchX's serving app, in TorchX's image.
SERVE_APP: str = "torchx.apps.serve.serve"
#: The port the app serves the model archive on, for TorchServe to download it.
MODEL_DOWNLOAD_PORT: int = 8222


def torchserve(
    model_path: str,
    management_api: str,
    image: str = IMAGE,
    params: dict[str, str] | None = None,
    dryrun: bool = False,
) -> AppDef:
    """Deploys the provided model to the given torchserve management API endpoint.

    Args:
        model_path: The fsspec path to the model archive file.
        management_api: The URL to the root of the torchserve management API.
        image: Container to use.
        params: torchserve parameters, each passed as ``--<name> <value>``
        dryrun: Start the app, but does not perform actual work
    """
    args = ["-m", SERVE_APP, "--model_path", model_path, "--management_api", management_api]
    for name, value in (params or {}).items():
        args += [f"--{name}", str(value)]
    if dryrun:
        args.append("--dryrun")
    role = Role(
        name="worker",
        image=image,
        entrypoint="python",
        args=args,
        port_map={"model-download": MODEL_DOWNLOAD_PORT},
        resource=Resource(cpu=1, gpu=0, memMB=1024),
    )
    return AppDef(name="torchx-torchserve", roles=[role])
