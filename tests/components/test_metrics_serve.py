"""metrics.tensorboard and serve.torchserve: TorchX's two service builtins."""

from __future__ import annotations

import pytest

from asynctorchx.components import IMAGE, metrics, serve
from asynctorchx.components.component_test_base import ComponentTestCase
from asynctorchx.specs.builders import materialize_appdef
from asynctorchx.specs.finder import get_components


@pytest.mark.parametrize("name", ["metrics.tensorboard", "serve.torchserve"])
def test_they_are_valid_builtins(name: str) -> None:
    component = get_components()[name]
    assert component.validation_errors == []
    module, _, fn_name = name.partition(".")
    ComponentTestCase("run").validate({"metrics": metrics, "serve": serve}[module], fn_name)


def test_tensorboard_runs_tensorboard_under_torchx_process_monitor() -> None:
    app = materialize_appdef(
        metrics.tensorboard,
        ["--logdir", "s3://bucket/tb", "--port", "7007", "--timeout", "30", "--exit_on_file", "f"],
    )
    (role,) = app.roles
    assert (app.name, role.name, role.image, role.entrypoint) == (
        "tensorboard",
        "tensorboard",
        IMAGE,
        "python",
    )
    monitor, command = role.args[: role.args.index("--")], role.args[role.args.index("--") + 1 :]
    assert monitor[:2] == ["-m", "torchx.apps.utils.process_monitor"]
    options = dict(zip(monitor[2::2], monitor[3::2], strict=True))
    assert options == {"--timeout": "30.0", "--start_on_file": "", "--exit_on_file": "f"}
    assert command == ["tensorboard", "--bind_all", "--port", "7007", "--logdir", "s3://bucket/tb"]
    assert role.port_map == {"http": 7007}


def test_tensorboard_defaults_to_an_hour_on_6006() -> None:
    (role,) = metrics.tensorboard(logdir="/logs").roles
    assert role.args[role.args.index("--timeout") + 1] == "3600"
    assert role.port_map == {"http": 6006}


def test_torchserve_passes_each_param_as_an_option() -> None:
    app = materialize_appdef(
        serve.torchserve,
        [
            "--model_path",
            "s3://bucket/m.mar",
            "--management_api",
            "http://ts:8081",
            "--params",
            "initial_workers=2,synchronous=true",
            "--dryrun",
            "true",
        ],
    )
    (role,) = app.roles
    assert (app.name, role.name, role.entrypoint) == ("torchx-torchserve", "worker", "python")
    assert role.args == [
        "-m",
        "torchx.apps.serve.serve",
        "--model_path",
        "s3://bucket/m.mar",
        "--management_api",
        "http://ts:8081",
        "--initial_workers",
        "2",
        "--synchronous",
        "true",
        "--dryrun",
    ]
    assert role.port_map == {"model-download": 8222}
    assert (role.resource.cpu, role.resource.gpu, role.resource.memMB) == (1, 0, 1024)


def test_torchserve_without_params_or_dryrun() -> None:
    (role,) = serve.torchserve("m.mar", "http://ts:8081", image="my:img").roles
    assert role.image == "my:img"
    assert "--dryrun" not in role.args
    assert role.args[-2:] == ["--management_api", "http://ts:8081"]
