"""Exceptions keep TorchX's constructors; `asynctorchx.errors` names every backend's lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

from asynctorchx import errors
from asynctorchx.errors import InvalidRunConfigException, UnknownSchedulerException


def test_invalid_run_config_takes_torchx_three_arguments() -> None:
    cfg = {"log_dir": 3}
    error = InvalidRunConfigException("log_dir must be a str", "log_dir", cfg)
    assert str(error) == "log_dir must be a str"
    assert (error.cfg_key, error.cfg) == ("log_dir", cfg)
    assert isinstance(error, ValueError)


def test_unknown_scheduler_with_and_without_the_choices() -> None:
    assert str(UnknownSchedulerException("slurm")) == "unknown scheduler 'slurm'"
    listed = UnknownSchedulerException("slurm", ["local_dir", "local_cwd"])
    assert str(listed) == "unknown scheduler 'slurm': choose one of local_cwd, local_dir"


def test_importing_errors_imports_no_backend() -> None:
    code = (
        "import sys, asynctorchx.errors\n"
        "print(sorted(m for m in sys.modules if m.startswith("
        "('asynctorchx.schedulers', 'aiodocker', 'lightkube'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_backend_errors_are_reexported_under_one_refusal_base() -> None:
    from asynctorchx.schedulers.docker._errors import DockerEngineError
    from asynctorchx.schedulers.kubernetes._errors import KubernetesApiError
    from asynctorchx.schedulers.slurm._errors import SlurmCommandError

    assert errors.DockerEngineError is DockerEngineError
    for refused in (DockerEngineError, KubernetesApiError, SlurmCommandError):
        assert issubclass(refused, errors.SchedulerRequestError)
    assert all(hasattr(errors, name) for name in errors.__all__)
    with pytest.raises(AttributeError, match="NoSuchError"):
        errors.NoSuchError  # noqa: B018
