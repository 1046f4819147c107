"""The directory workspace (``slurm``'s): what is copied into ``job_dir``, and what is refused.

The copy on the cluster, through the CLI and the Runner, is tested in
``tests/schedulers/slurm/test_workspace.py``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from asynctorchx.errors import InvalidJobDirError, InvalidRunConfigException
from asynctorchx.schedulers.slurm_scheduler import SlurmScheduler
from asynctorchx.specs.api import Role
from asynctorchx.workspace import WorkspaceMixin
from asynctorchx.workspace.dir_workspace import TORCHX_IGNORE, DirWorkspaceMixin, copy_workspace


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "pkg" / "data").mkdir(parents=True)
    (root / "main.py").write_text("print('hi')\n")
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "pkg" / "data" / "big.bin").write_bytes(b"0" * 10)
    (root / "pkg" / "data" / "keep.txt").write_text("kept\n")
    (root / "run.log").write_text("old\n")
    (root / TORCHX_IGNORE).write_text("# comment\n*.log\npkg/data\n!pkg/data/keep.txt\n")
    return root


def test_slurm_is_a_directory_workspace_scheduler() -> None:
    assert issubclass(SlurmScheduler, DirWorkspaceMixin)
    assert issubclass(SlurmScheduler, WorkspaceMixin)
    assert SlurmScheduler.capabilities.workspace == "directory"


def test_the_copy_leaves_out_what_torchxignore_names(project: Path, tmp_path: Path) -> None:
    job_dir = tmp_path / "jobs" / "run-1"  # parents are created
    assert copy_workspace(str(project), str(job_dir)) == str(job_dir)
    # `pkg/data` is left out whole: a directory a pattern ignores is not entered
    assert _files(job_dir) == {"main.py", "pkg/mod.py", TORCHX_IGNORE}
    assert (job_dir / "main.py").read_text() == "print('hi')\n"


# Runs in TorchX's venv: the files TorchX's walk_workspace keeps of argv[1], one a line.
_TORCHX_WALK = """
import posixpath, sys
import fsspec
from torchx.workspace.api import walk_workspace
root = sys.argv[1]
for directory, _, files in walk_workspace(fsspec.filesystem("file"), root):
    rel = posixpath.relpath(directory, root)
    for name in files:
        print(name if rel == "." else f"{rel}/{name}")
"""

#: patterns whose meaning under TorchX's matching differs from .dockerignore's
_PATTERNS = """\
# comment line
*.pyc        # every .pyc, at any depth: `*` matches `/`
__pycache__
data
!data/keep.csv
*.log
!keep.log
**/secret*
build/
drop
!drop
"""


def test_the_same_files_as_torchx_walk_workspace(tmp_path: Path) -> None:
    from tests.schedulers.slurm.conftest import BUILD_TORCHX_VENV, torchx_python

    torchx = torchx_python()
    if torchx is None:
        pytest.skip(f"no TorchX 0.7.0 venv; build it with: {BUILD_TORCHX_VENV}")
    root = tmp_path / "ws"
    names = [
        "main.py", "a.pyc", "pkg/m.py", "pkg/m.pyc", "pkg/__pycache__/m.pyc", "__pycache__/x",
        "data/x.csv", "data/keep.csv", "build/out", "sub/a.log", "a.log", "keep.log",
        "sub/secret.key", "secret.key", "drop/inner.txt", "drop/x.log",
    ]  # fmt: skip
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    (root / TORCHX_IGNORE).write_text(_PATTERNS)
    walked = subprocess.run(
        [str(torchx), "-c", _TORCHX_WALK, str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    copy_workspace(str(root), str(tmp_path / "job"))
    assert _files(tmp_path / "job") == set(walked.stdout.split())
    assert "pkg/m.pyc" not in walked.stdout  # what Docker's rules would have kept


async def test_the_role_runs_in_the_copy(project: Path, tmp_path: Path) -> None:
    role = Role("main", image="unused", entrypoint="python", args=["main.py"])
    job_dir = tmp_path / "job"
    await SlurmScheduler("s").build_workspace_and_update_role(
        role, str(project), {"job_dir": str(job_dir)}
    )
    assert role.image == str(job_dir)  # so ${img_root} is job_dir, as in TorchX
    assert (job_dir / "main.py").is_file()


def test_an_empty_job_dir_is_used_and_a_job_dir_inside_the_workspace_is_skipped(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_dir = project / "job"
    job_dir.mkdir()
    monkeypatch.chdir(project)
    copy_workspace(".", "job")
    assert "main.py" in os.listdir(job_dir)
    assert not (job_dir / "job").exists()


@pytest.mark.parametrize("kind", ["not empty", "a file"])
def test_an_unusable_job_dir_is_refused_and_left_as_it_was(
    project: Path, tmp_path: Path, kind: str
) -> None:
    job_dir = tmp_path / "job"
    if kind == "a file":
        job_dir.write_text("mine\n")
    else:
        job_dir.mkdir()
        (job_dir / "old.py").write_text("mine\n")
    with pytest.raises(InvalidJobDirError, match=f"job_dir '{job_dir}': .*{kind[-5:]}") as err:
        copy_workspace(str(project), str(job_dir))
    assert isinstance(err.value, InvalidRunConfigException)
    assert err.value.cfg_key == "job_dir"
    assert "give a new directory" in str(err.value)
    if kind == "a file":
        assert job_dir.read_text() == "mine\n"
    else:
        assert os.listdir(job_dir) == ["old.py"]


def test_a_job_dir_that_cannot_be_created_is_refused(project: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(InvalidJobDirError, match="cannot be created"):
        copy_workspace(str(project), str(tmp_path / "file" / "job"))


def test_without_job_dir_only_the_current_directory_runs_as_the_workspace(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    assert copy_workspace(str(project), None) is None  # the job runs here: nothing to copy
    monkeypatch.chdir(project.parent)
    with pytest.raises(InvalidJobDirError, match="no job_dir: the job would run in the current"):
        copy_workspace(str(project), None)


def test_a_copy_that_fails_half_way_is_removed(project: Path, tmp_path: Path) -> None:
    os.mkfifo(project / "pkg" / "zz-fifo")  # copy2 refuses a named pipe, after other files
    for job_dir in (tmp_path / "new", tmp_path / "empty"):
        if job_dir.name == "empty":
            job_dir.mkdir()
        with pytest.raises(OSError, match="named pipe"):
            copy_workspace(str(project), str(job_dir))
        assert not job_dir.exists() if job_dir.name == "new" else os.listdir(job_dir) == []


def test_a_workspace_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="pass a directory"):
        copy_workspace(str(tmp_path / "missing"), str(tmp_path / "job"))
    assert not (tmp_path / "job").exists()
