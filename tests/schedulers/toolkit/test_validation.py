"""The checks every backend makes on what it is given, before building a request."""

from __future__ import annotations

import math

import pytest

from asynctorchx.errors import InvalidRunConfigException
from asynctorchx.schedulers.toolkit import validate_stop_timeout


@pytest.mark.parametrize("seconds", [0, 0.5, 10, 3600.0])
def test_a_finite_grace_period_of_zero_or_more_is_kept_as_float(seconds: float) -> None:
    assert validate_stop_timeout(seconds) == float(seconds)
    assert isinstance(validate_stop_timeout(seconds), float)


@pytest.mark.parametrize("seconds", [math.nan, math.inf, -math.inf, -0.5, "10", True, None])
def test_a_grace_period_that_cannot_be_waited_is_refused(seconds: object) -> None:
    with pytest.raises(InvalidRunConfigException, match="finite number of seconds") as caught:
        validate_stop_timeout(seconds)
    assert caught.value.cfg_key == "stop_timeout"
    assert repr(seconds) in str(caught.value)
