"""Bad inputs to ``local_docker`` are refused when given, naming the value (no engine)."""

from __future__ import annotations

import math

import pytest

from asynctorchx.errors import InvalidAppIdException, InvalidRunConfigException
from asynctorchx.schedulers.docker_scheduler import DockerScheduler, create_scheduler


@pytest.mark.parametrize("stop_timeout", [math.nan, math.inf, -1.0])
async def test_a_stop_timeout_that_cannot_be_waited_is_refused(
    stop_timeout: float,
) -> None:
    # math.ceil(nan) used to raise a bare ValueError in the middle of a cancel
    with pytest.raises(InvalidRunConfigException, match="finite number of seconds"):
        DockerScheduler("t", stop_timeout=stop_timeout)
    with pytest.raises(InvalidRunConfigException, match=repr(stop_timeout)):
        create_scheduler("t", stop_timeout=str(stop_timeout))


def test_an_invalid_app_id_is_refused_when_its_log_is_asked_for() -> None:
    # before any engine request, at the call: not at the first line of the iteration
    with pytest.raises(InvalidAppIdException, match="etc"):
        DockerScheduler("t").log_iter("../etc", "r")
