"""The local schedulers' run options as a user reads them in ``--help``."""

from __future__ import annotations

from asynctorchx.schedulers.local_scheduler import DEFAULT_STOP_TIMEOUT, create_cwd_scheduler


def test_stop_timeout_is_a_float_of_seconds_with_a_default() -> None:
    option = create_cwd_scheduler("test").run_opts().get("stop_timeout")
    assert option is not None
    assert option.opt_type is float
    assert option.default == DEFAULT_STOP_TIMEOUT == 10.0
    assert "seconds" in option.help
