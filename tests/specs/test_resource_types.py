"""``Resource`` refuses a wrongly typed field when it is made, naming the value and the fix."""

from __future__ import annotations

import math
from typing import Any

import pytest

from asynctorchx.errors import InvalidResourceError
from asynctorchx.specs import NULL_RESOURCE, Resource, named_resources


@pytest.mark.parametrize(
    ("fields", "field", "shown"),
    [
        ({"cpu": "x", "gpu": 0, "memMB": 1024}, "cpu", "'x'"),
        ({"cpu": "2", "gpu": 0, "memMB": 1024}, "cpu", "'2'"),
        ({"cpu": 1, "gpu": None, "memMB": 1024}, "gpu", "None"),
        ({"cpu": 1, "gpu": True, "memMB": 1024}, "gpu", "True"),
        ({"cpu": 1, "gpu": 0, "memMB": "1G"}, "memMB", "'1G'"),
        ({"cpu": 1, "gpu": 0, "memMB": b"1"}, "memMB", "b'1'"),
        ({"cpu": 1, "gpu": 0, "memMB": 1, "capabilities": ["a"]}, "capabilities", "['a']"),
        ({"cpu": 1, "gpu": 0, "memMB": 1, "devices": {"efa": "1"}}, "devices", "'1'"),
        ({"cpu": 1, "gpu": 0, "memMB": 1, "devices": {1: 1}}, "devices", "1"),
    ],
)
def test_a_wrongly_typed_field_is_refused_with_the_value_and_the_fix(
    fields: dict[str, Any], field: str, shown: str
) -> None:
    with pytest.raises(InvalidResourceError) as caught:
        Resource(**fields)
    message = str(caught.value)
    assert message.startswith(f"Resource {field}=")
    assert shown in message
    assert "e.g." in message  # how to write it
    assert caught.value.field == field
    # code that guards a bad resource with the usual exceptions still catches it
    assert isinstance(caught.value, TypeError | ValueError)


def test_a_field_assigned_later_is_checked_too() -> None:
    resource = Resource(cpu=1, gpu=0, memMB=1024)
    with pytest.raises(InvalidResourceError, match="cpu='x'"):
        resource.cpu = "x"  # type: ignore[assignment]


def test_numbers_are_accepted_as_torchx_accepts_them() -> None:
    """Ints, and floats where schedulers take fractions (``cpu=0.5`` on kubernetes)."""
    assert Resource(cpu=0.5, gpu=0, memMB=512.0).cpu == 0.5  # type: ignore[arg-type]
    assert Resource(-1, -1, -1) == NULL_RESOURCE
    assert Resource(cpu=1, gpu=0, memMB=1, devices={"vpc.amazonaws.com/efa": 2}).devices
    assert named_resources["aws_p4d.24xlarge"].gpu == 8
    # values are each scheduler's to judge at dry run (local_docker refuses these)
    assert math.isnan(Resource(cpu=math.nan, gpu=0, memMB=1).cpu)  # type: ignore[arg-type]
    assert Resource(cpu=-2, gpu=0, memMB=1).cpu == -2
