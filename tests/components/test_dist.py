"""dist.ddp / dist.spmd: the torchrun command lines, and real torchrun runs when torch is here."""

from __future__ import annotations

import inspect
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from asynctorchx.components import dist
from asynctorchx.components.structured_arg import StructuredJArgument, StructuredNameArgument
from asynctorchx.errors import UnknownNamedResourceException
from asynctorchx.specs import Resource, Role, VolumeMount, macros, named_resources
from asynctorchx.specs.builders import materialize_appdef

LIMIT = 120  # seconds: a safety bound on torch start-up, never a timing guess
RANK0 = "TORCHX_RANK0_HOST"


def substitute(role: Role, replica_id: int) -> Role:
    return macros.Values(
        img_root="", app_id="app-1", replica_id=str(replica_id), rank0_env=RANK0
    ).apply(role)


def test_single_node_runs_python_without_a_shell() -> None:
    app = materialize_appdef(
        dist.ddp, ["-j", "1x2", "--script", "path/train.py", "--", "--lr", "0.1", "$x y"]
    )
    role = app.roles[0]
    assert (app.name, role.name, role.entrypoint) == ("train", "train", "python")
    assert (role.num_replicas, role.min_replicas) == (1, 1)
    assert role.args == [
        "-m", "torch.distributed.run",
        "--rdzv_backend", "c10d",
        "--rdzv_endpoint", "localhost:0",
        "--rdzv_id", macros.app_id,
        "--nnodes", "1",
        "--nproc_per_node", "2",
        "--tee", "3",
        "--role", "",
        "path/train.py", "--lr", "0.1", "$x y",
    ]  # fmt: skip
    assert substitute(role, 0).args[7] == "app-1"
    assert role.port_map == {"c10d": 29500}
    assert role.resource == Resource(cpu=2, gpu=0, memMB=1024)
    assert role.env["TORCHX_TRACKING_EXPERIMENT_NAME"] == "default-experiment"


def test_multi_node_reads_rank0_host_through_bash() -> None:
    app = dist.ddp("--lr", "1 2", m="pkg.trainer", j="2x4", rdzv_port=1234)
    role = app.roles[0]
    assert (app.name, role.name, role.entrypoint) == ("trainer", "trainer", "bash")
    assert (role.num_replicas, role.min_replicas) == (2, 2)
    assert role.port_map == {"c10d": 1234}
    command = substitute(role, 1).args
    assert command[0] == "-c"
    assert command[1] == (
        "python -m torch.distributed.run --rdzv_backend c10d"
        " --rdzv_endpoint ${TORCHX_RANK0_HOST:=localhost}:1234 --rdzv_id 'app-1'"
        " --nnodes 2 --nproc_per_node 4 --tee 3 --role '' -m pkg.trainer --lr '1 2'"
    )


def test_elastic_range_and_static_backend() -> None:
    role = dist.ddp(script="t.py", j="1:3x2", rdzv_backend="static").roles[0]
    assert (role.min_replicas, role.num_replicas) == (1, 3)
    command = substitute(role, 2).args[1]
    assert "--nnodes 1:3" in command
    assert "--rdzv_backend static" in command
    assert "--node_rank '2' t.py" in command


def test_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGLEVEL", "INFO")
    app = materialize_appdef(
        dist.ddp,
        [
            "--script", "t.py", "-j", "4", "--name", "exp/run", "-h", "aws_g5.xlarge",
            "--env", "A=1", "--debug", "true", "--max_retries", "3", "--tee", "1",
            "--mounts", "type=volume,src=v,dst=/v",
        ],
    )  # fmt: skip
    role = app.roles[0]
    assert app.name == "run"
    assert role.resource == named_resources["aws_g5.xlarge"]
    assert role.env == {
        "A": "1",
        "TORCHX_TRACKING_EXPERIMENT_NAME": "exp",
        "TORCHX_TRACKING_RUN_NAME": "run",  # torchx-nightly's addition
        "LOGLEVEL": "INFO",
        **dist.TORCH_DEBUG_FLAGS,
    }
    assert role.max_retries == 3
    assert role.mounts == [VolumeMount("v", "/v")]
    assert role.args[role.args.index("--nproc_per_node") + 1] == "4"
    assert role.args[role.args.index("--tee") + 1] == "1"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of --script and -m"),
        ({"script": "a.py", "m": "a"}, "exactly one of --script and -m"),
        ({"script": "a.py", "j": "2x"}, "invalid -j '2x'"),
    ],
)
def test_ddp_errors(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dist.ddp(**kwargs)  # type: ignore[arg-type]


def test_parse_nnodes() -> None:
    assert dist.parse_nnodes("4") == (1, 1, 4, "1")
    assert dist.parse_nnodes("2x3") == (2, 2, 3, "2")
    assert dist.parse_nnodes("1:4x8") == (1, 4, 8, "1:4")


def test_spmd_infers_processes_from_gpus() -> None:
    app = materialize_appdef(dist.spmd, ["-j", "2", "-h", "aws_p4d.24xlarge", "-m", "a.b"])
    role = app.roles[0]
    assert role.num_replicas == 2
    assert role.resource == named_resources["aws_p4d.24xlarge"]
    assert "--nproc_per_node 8" in role.args[1]
    default = dist.spmd(script="t.py").roles[0]
    assert default.resource == named_resources["gpu.small"]
    assert default.entrypoint == "python"
    assert default.args[default.args.index("--nproc_per_node") + 1] == "1"


def test_structured_j() -> None:
    assert str(StructuredJArgument.parse_from("gpu.large", "3")) == "3x4"
    with pytest.warns(UserWarning, match="has 4 GPUs"):
        assert str(StructuredJArgument.parse_from("gpu.large", "1x2")) == "1x2"
    with pytest.raises(ValueError, match="no GPU"):
        StructuredJArgument.parse_from("cpu.small", "2")
    with pytest.raises(ValueError, match="NNODES"):
        StructuredJArgument.parse_from("gpu.small", "x2")
    with pytest.raises(UnknownNamedResourceException):
        dist.spmd(script="t.py", h="gpu.smal")


@pytest.mark.parametrize(
    ("name", "kwargs", "expected"),
    [
        ("foo/bar", {"script": "x/baz.py"}, ("foo", "bar")),
        ("foo/", {"script": "x/baz.py"}, ("foo", "baz")),
        ("/bar", {"m": "a.b.c"}, ("default-experiment", "bar")),
        ("bar", {"m": "a.b.c"}, ("default-experiment", "bar")),
        ("/", {"m": "a.b.c"}, ("default-experiment", "c")),
    ],
)
def test_structured_name(name: str, kwargs: dict[str, str], expected: tuple[str, str]) -> None:
    parsed = StructuredNameArgument.parse_from(name, **kwargs)
    assert (parsed.experiment_name, parsed.run_name) == expected


def test_structured_name_needs_one_program() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        StructuredNameArgument.parse_from("a/b")


# --------------------------------------------------------------------------- real torchrun

TRAIN = """\
import os, sys
import torch
import torch.distributed as d
d.init_process_group("gloo")
t = torch.tensor([d.get_rank() + 1.0])
d.all_reduce(t)
out = os.path.join(sys.argv[1], f"rank{d.get_rank()}-of-{d.get_world_size()}")
with open(out, "w") as f:
    f.write(str(t.item()))
d.destroy_process_group()
"""


def _env() -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)  # `python` is this interpreter
    return {**os.environ, "PATH": venv_bin + os.pathsep + os.environ.get("PATH", "")}


def _start(role: Role, replica_id: int, cwd: Path, extra: dict[str, str]) -> subprocess.Popen[str]:
    replica = substitute(role, replica_id)
    entrypoint = sys.executable if replica.entrypoint == "python" else replica.entrypoint
    return subprocess.Popen(
        [entrypoint, *replica.args],
        cwd=cwd,
        env={**_env(), **replica.env, **extra},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.torch
def test_one_node_two_workers_all_reduce(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    role = dist.ddp(str(tmp_path), script="train.py", j="1x2").roles[0]
    proc = _start(role, 0, tmp_path, {RANK0: "localhost"})
    output, _ = proc.communicate(timeout=LIMIT)
    assert proc.returncode == 0, output
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}-of-2").read_text() == "3.0"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return int(sock.getsockname()[1])


@pytest.mark.torch
def test_two_nodes_meet_at_the_rank0_host(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    role = dist.ddp(str(tmp_path), script="train.py", j="2x1", rdzv_port=_free_port()).roles[0]
    assert role.entrypoint == "bash"
    procs = [_start(role, replica, tmp_path, {RANK0: "localhost"}) for replica in (0, 1)]
    outputs = [proc.communicate(timeout=LIMIT)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}-of-2").read_text() == "3.0"


def test_top_level_image_is_the_components_default() -> None:
    import asynctorchx
    from asynctorchx.components import IMAGE

    assert asynctorchx.IMAGE == IMAGE == "ghcr.io/pytorch/torchx:0.7.0"  # torchx.IMAGE


@pytest.mark.parametrize(
    ("kwargs", "start"),
    [
        ({"name": "/"}, "No main module or script specified"),
        ({"name": "/", "m": "a", "script": "b.py"}, "Both main module and script set"),
    ],
)
def test_structured_name_errors_start_as_torchx(kwargs: dict[str, str], start: str) -> None:
    from asynctorchx.components.structured_arg import StructuredNameArgument

    with pytest.raises(ValueError, match=f"^{start}"):
        StructuredNameArgument.parse_from(**kwargs)


def test_structured_j_errors_start_as_torchx() -> None:
    from asynctorchx.components.structured_arg import StructuredJArgument

    with pytest.raises(ValueError, match=r"^Invalid format for `-j \$NNODESx\$NPROCS_PER_NODE`"):
        StructuredJArgument.parse_from("aws_p3.8xlarge", "1x2x3")
    with pytest.raises(ValueError, match=r"^nproc_per_node cannot be inferred from GPU count"):
        StructuredJArgument.parse_from("aws_t3.medium", "2")
    with pytest.warns(UserWarning, match=r"^In `-j 2x8` you specified nproc_per_node=8"):
        StructuredJArgument.parse_from("aws_p3.8xlarge", "2x8")


def test_torchrun_is_ddp_under_another_name() -> None:
    argv = ["-j", "2x4", "--script", "train.py", "--rdzv_port", "29600", "--", "--lr", "1"]
    assert materialize_appdef(dist.torchrun, argv) == materialize_appdef(dist.ddp, argv)


def test_torchrun_is_a_builtin_and_passes_the_linter() -> None:
    from asynctorchx.specs import file_linter
    from asynctorchx.specs.finder import get_components

    assert "dist.torchrun" in get_components()
    assert file_linter.validate(dist.__file__, "torchrun") == []


def test_torchrun_takes_exactly_ddps_arguments_and_documents_them_alike() -> None:
    """The one copy the component model forces (a component is read from its source)."""
    from asynctorchx.specs.file_linter import get_fn_docstring

    assert inspect.signature(dist.torchrun) == inspect.signature(dist.ddp)
    assert get_fn_docstring(dist.torchrun)[1].keys() == get_fn_docstring(dist.ddp)[1].keys()


def test_debug_flags_under_torchx_private_name() -> None:
    """``_TORCH_DEBUG_FLAGS``: TorchX's name, shown in its docs; ``--debug`` sets them."""
    assert dist._TORCH_DEBUG_FLAGS is dist.TORCH_DEBUG_FLAGS
    env = dist.ddp(script="train.py", debug=True).roles[0].env
    assert {k: env[k] for k in dist._TORCH_DEBUG_FLAGS} == dist._TORCH_DEBUG_FLAGS
