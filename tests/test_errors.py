"""Exceptions keep TorchX's constructors, so code that raises TorchX's ports unchanged."""

from __future__ import annotations

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
