"""Overlays (torchx-nightly's ``torchx.specs.overlays``): how they merge and where they live."""

from __future__ import annotations

import pytest

from asynctorchx.specs import Role
from asynctorchx.specs.overlays import (
    DEL,
    JOIN,
    PUT,
    OverlaySpec,
    apply_overlay,
    get_overlay,
    set_overlay,
    validate_overlay,
)


def test_dicts_merge_lists_append_tuples_and_scalars_replace() -> None:
    base = {"spec": {"a": 1, "items": [1], "kept": [0], "labels": {"x": "1"}}}
    apply_overlay(
        base, {"spec": {"a": 2, "items": [2], "kept": (9,), "labels": {"y": "2"}, "new": [3]}}
    )
    assert base == {
        "spec": {"a": 2, "items": [1, 2], "kept": [9], "labels": {"x": "1", "y": "2"}, "new": [3]}
    }


def test_operators_replace_join_and_delete() -> None:
    base = {
        "containers": [{"name": "main", "image": "v1"}, {"name": "side", "image": "s"}],
        "volumes": [{"name": "a"}],
        "hostNetwork": True,
    }
    apply_overlay(
        base,
        {
            JOIN("containers", on="name"): [{"name": "main", "image": "v2"}, {"name": "new"}],
            PUT("volumes"): [{"name": "b"}],
            DEL("hostNetwork"): None,
        },
    )
    assert base == {
        "containers": [
            {"name": "main", "image": "v2"},
            {"name": "side", "image": "s"},
            {"name": "new"},
        ],
        "volumes": [{"name": "b"}],
    }


def test_a_dict_meeting_a_list_is_a_type_error_naming_the_field() -> None:
    with pytest.raises(TypeError, match="'spec'"):
        apply_overlay({"spec": {}}, {"spec": ["x"]})
    with pytest.raises(TypeError, match="list of dicts"):
        apply_overlay({"c": ["x"]}, {JOIN("c", on="name"): [{"name": "y"}]})


def test_set_overlay_accumulates_and_keeps_operators_for_apply() -> None:
    role = Role("trainer", image="img")
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {"nodeSelector": {"gpu": "a100"}}})
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {"tolerations": [{"key": "gpu"}]}})
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {PUT("volumes"): [{"name": "data"}]}})
    assert get_overlay(role, "kubernetes", "V1Pod") == {
        "spec": {
            "nodeSelector": {"gpu": "a100"},
            "tolerations": [{"key": "gpu"}],
            PUT("volumes"): [{"name": "data"}],
        }
    }
    assert get_overlay(role, "kubernetes", "OtherKind") == {}  # never another kind's
    pod = {"spec": {"volumes": [{"name": "dshm"}]}}
    apply_overlay(pod, get_overlay(role, "kubernetes", "V1Pod"))
    assert pod["spec"]["volumes"] == [{"name": "data"}]


def test_the_flat_form_is_read_unless_refused() -> None:
    role = Role("trainer", image="img", metadata={"kubernetes": {"spec": {"x": 1}}})
    assert get_overlay(role, "kubernetes", "V1Pod") == {"spec": {"x": 1}}
    assert get_overlay(role, "kubernetes", "V1Pod", flat_fallback=False) == {}


def test_unsupported_forms_and_blocked_fields_are_refused() -> None:
    role = Role("trainer", image="img", metadata={"kubernetes": "file:///pod.yaml"})
    with pytest.raises(TypeError, match="overlay files are not supported"):
        get_overlay(role, "kubernetes", "V1Pod")
    with pytest.raises(ValueError, match=r"`PodSpec\.env`"):
        validate_overlay({PUT("env"): []}, blocklist=["env"], overlay_name="PodSpec")
    spec = OverlaySpec("kubernetes", "V1Pod", blocklist=("status",))
    with pytest.raises(ValueError, match=r"V1Pod\.status"):
        spec.set(Role("r", image="i"), {"status": {}})
