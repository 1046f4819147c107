"""The utils builtins: their AppDefs, and their command lines run as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asynctorchx.components import IMAGE, utils
from asynctorchx.errors import UnknownNamedResourceException
from asynctorchx.specs import NONE, AppDef, BindMount, Resource, Role, macros, named_resources
from asynctorchx.specs.builders import materialize_appdef

LIMIT = 60  # seconds: a safety bound on a process, never a timing guess


def run_role(role: Role, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run replica 0 of ``role`` as the local scheduler would (``python`` is this one)."""
    replica = macros.Values(
        img_root=str(cwd), app_id="app-1", replica_id="0", rank0_env="TORCHX_RANK0_HOST"
    ).apply(role)
    entrypoint = sys.executable if replica.entrypoint == "python" else replica.entrypoint
    return subprocess.run(
        [entrypoint, *replica.args],
        cwd=cwd,
        env={**os.environ, **replica.env},
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )


def only_role(app: AppDef) -> Role:
    assert len(app.roles) == 1
    return app.roles[0]


def test_echo_defaults_and_run(tmp_path: Path) -> None:
    app = utils.echo()
    role = only_role(app)
    assert (app.name, role.name, role.entrypoint, role.args) == (
        "echo",
        "echo",
        "echo",
        ["hello world"],
    )
    assert role.image == IMAGE == "ghcr.io/pytorch/torchx:0.7.0"
    assert role.resource == Resource(cpu=1, gpu=0, memMB=1024)
    role = only_role(materialize_appdef(utils.echo, ["--msg", "hi there", "--num_replicas", "3"]))
    assert role.num_replicas == 3
    out = run_role(role, tmp_path)
    assert (out.returncode, out.stdout) == (0, "hi there\n")


def test_touch_creates_the_file(tmp_path: Path) -> None:
    role = only_role(materialize_appdef(utils.touch, ["--file", "made"]))
    assert (role.entrypoint, role.args) == ("touch", ["made"])
    assert run_role(role, tmp_path).returncode == 0
    assert (tmp_path / "made").is_file()


def test_sh_quotes_each_argument(tmp_path: Path) -> None:
    role = only_role(materialize_appdef(utils.sh, ["echo", "a  b", "$HOME", ";", "exit", "3"]))
    assert role.entrypoint == "sh"
    assert role.args == ["-c", "echo 'a  b' '$HOME' ';' exit 3"]
    out = run_role(role, tmp_path)
    assert (out.returncode, out.stdout) == (0, "a  b $HOME ; exit 3\n")
    role = only_role(materialize_appdef(utils.sh, ["sh", "-c", "echo failing; exit 7"]))
    out = run_role(role, tmp_path)
    assert (out.returncode, out.stdout) == (7, "failing\n")


def test_sh_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOGLEVEL", raising=False)
    role = only_role(
        materialize_appdef(
            utils.sh,
            [
                "--env", "A=1,B=2", "--h", "cpu.small", "--max_retries", "2",
                "--mounts", "type=bind,src=/tmp,dst=/data,readonly", "true",
            ],
        )
    )  # fmt: skip
    assert role.env == {"A": "1", "B": "2", "LOGLEVEL": "WARNING"}
    assert role.resource == named_resources["cpu.small"]
    assert role.max_retries == 2
    assert role.mounts == [BindMount("/tmp", "/data", read_only=True)]
    role = only_role(utils.sh("true", cpu=3, gpu=1, memMB=10))
    assert role.resource == Resource(cpu=3, gpu=1, memMB=10)
    with pytest.raises(UnknownNamedResourceException):
        utils.sh("true", h="cpu.smal")


def test_python_module_command_and_script(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import sys; print('args', sys.argv[1:])\n")
    role = only_role(materialize_appdef(utils.python, ["--script", str(script), "--", "--x", "1"]))
    assert (role.name, role.entrypoint) == ("python", "python")
    assert role.args == [str(script), "--x", "1"]
    assert run_role(role, tmp_path).stdout == "args ['--x', '1']\n"

    app = materialize_appdef(utils.python, ["-c", "import sys; print(sys.argv[1:])", "a"])
    assert app.name == "torchx_utils_python"
    assert run_role(only_role(app), tmp_path).stdout == "['a']\n"

    role = only_role(materialize_appdef(utils.python, ["-m", "json.tool", "--h", "gpu.small"]))
    assert role.args == ["-m", "json.tool"]
    assert role.env == {"HYDRA_MAIN_MODULE": "json.tool"}
    assert role.resource == named_resources["gpu.small"]


@pytest.mark.parametrize("argv", [[], ["-m", "a", "-c", "b"]])
def test_python_needs_exactly_one_program(argv: list[str]) -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        materialize_appdef(utils.python, argv)


def test_binary(tmp_path: Path) -> None:
    app = materialize_appdef(utils.binary, ["--entrypoint", "echo", "x", "y"])
    role = only_role(app)
    assert (app.name, role.name, role.image, role.entrypoint) == (
        "torchx_utils_binary",
        "binary",
        NONE,
        "echo",
    )
    assert run_role(role, tmp_path).stdout == "x y\n"


def test_copy_copies_a_file(tmp_path: Path) -> None:
    (tmp_path / "src.txt").write_text("payload")
    app = materialize_appdef(utils.copy, ["--src", "src.txt", "--dst", "dst.txt"])
    assert app.name == "torchx-utils-copy"
    out = run_role(only_role(app), tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "dst.txt").read_text() == "payload"


def test_booth_evaluates_and_records(tmp_path: Path) -> None:
    base = tmp_path / "tracker"
    app = materialize_appdef(
        utils.booth, ["--x1", "1", "--x2", "3", "--trial_idx", "4", "--tracker_base", str(base)]
    )
    assert app.name == "torchx-utils-booth"
    out = run_role(only_role(app), tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads((base / "4").read_text()) == {"booth_eval": 0.0}
    app = utils.booth(0.0, 0.0, tracker_base=str(base))
    assert run_role(only_role(app), tmp_path).returncode == 0
    assert json.loads((base / "0").read_text()) == {"booth_eval": 74.0}


# Runs in TorchX's venv: what TorchX's tracker reads of trials 0 and 7 of argv[1], and
# what it reads after TorchX's own booth app has written trial 7 again on the same base.
_READ_WITH_TORCHX = """
import json, sys
from torchx.apps.utils import booth_main
from torchx.runtime.tracking import FsspecResultTracker
tracker = FsspecResultTracker(sys.argv[1])
ours = [tracker[0], tracker[7]]
booth_main.main(["--x1", "1", "--x2", "3", "--trial_idx", "7", "--tracker_base", sys.argv[1]])
print(json.dumps([*ours, tracker[7]]))
"""


@pytest.mark.parametrize("with_fsspec", [True, False], ids=["fsspec", "no-fsspec"])
def test_torchx_result_tracker_reads_what_booth_wrote(tmp_path: Path, with_fsspec: bool) -> None:
    from tests.schedulers.slurm.conftest import BUILD_TORCHX_VENV, torchx_python

    torchx = torchx_python()
    if torchx is None:
        pytest.skip(f"no TorchX 0.7.0 venv; build it with: {BUILD_TORCHX_VENV}")
    base = tmp_path / "tracker"
    hide = tmp_path / "no-fsspec"
    hide.mkdir()
    (hide / "fsspec.py").write_text("raise ImportError('hidden by the test')\n")
    # TorchX's venv has fsspec; this one is run with fsspec hidden (the plain-file path)
    python = str(torchx) if with_fsspec else sys.executable
    env = {**os.environ, "PYTHONPATH": "" if with_fsspec else str(hide)}
    for x1, x2, trial in ((0.0, 0.0, 0), (1.0, 2.0, 7)):
        role = only_role(utils.booth(x1, x2, trial_idx=trial, tracker_base=str(base)))
        replica = macros.Values(
            img_root=str(tmp_path), app_id="app-1", replica_id="0", rank0_env="RANK0"
        ).apply(role)
        done = subprocess.run(
            [python, *replica.args],
            env=env,
            capture_output=True,
            text=True,
            timeout=LIMIT,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    read = subprocess.run(
        [str(torchx), "-c", _READ_WITH_TORCHX, str(base)],
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout) == [
        {"booth_eval": 74.0},
        {"booth_eval": 5.0},
        {"booth_eval": 0.0},  # TorchX's app wrote over ours: x1=1, x2=3
    ]


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("utils.echo", "Echos a message to stdout (calls echo)"),
        ("utils.touch", "Touches a file (calls touch)"),
    ],
)
def test_builtin_descriptions_read_as_torchx_lists_them(name: str, description: str) -> None:
    """`asynctorchx builtins` and the finder show TorchX 0.7.0's one-line descriptions."""
    from asynctorchx.specs.finder import get_components

    assert get_components()[name].description == description
