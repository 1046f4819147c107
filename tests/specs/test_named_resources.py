"""Named resources: the generic and AWS tables, entry point plugins, unknown names."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import patch

import pytest

from asynctorchx.errors import UnknownNamedResourceException
from asynctorchx.specs import (
    NULL_RESOURCE,
    Resource,
    _named_resource_factories,
    _NamedResourcesLibrary,
    named_resources,
    resource,
    resource_tags,
)
from asynctorchx.specs import _named_resources as nr
from asynctorchx.specs.named_resources_aws import EFA_DEVICE, K8S_ITYPE, NEURON_DEVICE


def tagged(name: str, cpu: int, gpu: int, memMB: int) -> Resource:  # noqa: N803
    """The resource a lookup of ``name`` gives: tagged with that name (torchx-nightly)."""
    return Resource(cpu=cpu, gpu=gpu, memMB=memMB, tags={resource_tags.RESOURCE_NAME: name})


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    nr.reload()
    yield
    nr.reload()


def test_generic_figures_match_torchx() -> None:
    assert nr.named_resources["gpu.small"] == tagged("gpu.small", cpu=8, gpu=1, memMB=32 * 1024)
    assert nr.named_resources["gpu.xlarge"] == tagged("gpu.xlarge", cpu=64, gpu=8, memMB=256 * 1024)
    assert nr.named_resources["cpu.nano"] == tagged("cpu.nano", cpu=1, gpu=0, memMB=512)
    assert nr.named_resources["cpu.xlarge"] == tagged("cpu.xlarge", cpu=8, gpu=0, memMB=32 * 1024)


def test_aws_figures_carry_the_memory_tax_and_devices() -> None:
    p3 = nr.get_named_resources("aws_p3.2xlarge")
    assert (p3.cpu, p3.gpu, p3.memMB) == (8, 1, 61 * int(1024 * 0.96))
    assert p3.capabilities == {K8S_ITYPE: "p3.2xlarge"}
    assert p3.devices == {}
    p4d = nr.get_named_resources("aws_p4d.24xlarge")
    assert (p4d.cpu, p4d.gpu, p4d.memMB) == (96, 8, 1152 * 983)
    assert p4d.devices == {EFA_DEVICE: 4}
    trn = nr.get_named_resources("aws_trn1.32xlarge")
    assert trn.devices == {EFA_DEVICE: 8, NEURON_DEVICE: 16}
    assert nr.get_named_resources("aws_t3.medium").memMB == 4 * 983


def test_null_and_missing_are_the_null_resource() -> None:
    assert nr.named_resources["NULL"] == NULL_RESOURCE
    assert nr.named_resources["MISSING"] == NULL_RESOURCE


def test_each_lookup_is_a_fresh_copy() -> None:
    first = nr.named_resources["aws_g5.xlarge"]
    first.capabilities["mutated"] = True
    first.cpu = 999
    again = nr.named_resources["aws_g5.xlarge"]
    assert again.cpu == 4
    assert "mutated" not in again.capabilities
    null = nr.named_resources["NULL"]
    null.capabilities["x"] = 1
    assert NULL_RESOURCE.capabilities == {}


def test_mapping_protocol() -> None:
    names = list(nr.named_resources)
    assert names == sorted(names)
    assert {"gpu.small", "cpu.small", "aws_p5.48xlarge", "NULL"} <= set(names)
    assert len(nr.named_resources) == len(names)
    assert "gpu.small" in nr.named_resources
    assert "gpu.tiny" not in nr.named_resources
    assert nr.named_resources.get("gpu.tiny") is None


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(UnknownNamedResourceException) as caught:
        nr.get_named_resources("aws_p3.2xlrge")
    assert isinstance(caught.value, KeyError)
    message = str(caught.value)
    assert message.startswith("No named resource found for `aws_p3.2xlrge`. Did you mean")
    assert "`aws_p3.2xlarge`" in message


def test_unknown_far_name_lists_the_registered() -> None:
    with pytest.raises(KeyError) as caught:
        nr.named_resources["zzzzzzzzzzzzzzzzzzzzzzzz"]
    assert "Registered named resources: [" in str(caught.value)
    assert "cpu.small" in str(caught.value)


def test_resource_helper() -> None:
    assert nr.resource() == Resource(cpu=2, gpu=0, memMB=1024)
    assert nr.resource(cpu=4, gpu=1, memMB=100) == Resource(cpu=4, gpu=1, memMB=100)
    assert nr.resource(cpu=4, h="cpu.small") == nr.named_resources["cpu.small"]
    with pytest.raises(UnknownNamedResourceException):
        nr.resource(h="nope")


def _install_plugin(root: Path, entries: str, module_source: str) -> None:
    """Write a real installed distribution (a .dist-info with entry_points.txt)."""
    (root / "my_resources.py").write_text(textwrap.dedent(module_source))
    dist = root / "my_resources-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-resources\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[asynctorchx.named_resources]\n" + textwrap.dedent(entries)
    )


def test_entry_points_merge_over_the_builtins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_plugin(
        tmp_path,
        """\
        gpu_x_2 = my_resources:gpu_x_2
        gpu.small = my_resources:override
        broken = my_resources:not_a_resource
        """,
        """\
        from asynctorchx.specs import Resource

        def gpu_x_2():
            return Resource(cpu=2, gpu=2, memMB=64 * 1024)

        def override():
            return Resource(cpu=1, gpu=1, memMB=1)

        def not_a_resource():
            return "nope"
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    nr.reload()
    assert nr.get_named_resources("gpu_x_2") == tagged("gpu_x_2", cpu=2, gpu=2, memMB=64 * 1024)
    assert nr.get_named_resources("gpu.small") == tagged("gpu.small", cpu=1, gpu=1, memMB=1)
    assert nr.get_named_resources("cpu.small").memMB == 2048
    with pytest.raises(TypeError, match="broken"):
        nr.get_named_resources("broken")
    monkeypatch.undo()
    nr.reload()
    assert "gpu_x_2" not in nr.named_resources


def test_a_name_added_to_torchx_registry_at_run_time_is_looked_up() -> None:
    # TorchX's docs register a named resource this way (torchx.specs._named_resource_factories)
    _named_resource_factories["gpu_x2"] = lambda: Resource(cpu=16, gpu=2, memMB=122_000)
    _named_resource_factories["gpu.small"] = lambda: Resource(cpu=1, gpu=1, memMB=1)
    assert "gpu_x2" in named_resources
    assert "gpu_x2" in list(named_resources)
    assert resource(h="gpu_x2") == tagged("gpu_x2", cpu=16, gpu=2, memMB=122_000)
    assert nr.get_named_resources("gpu.small") == tagged("gpu.small", cpu=1, gpu=1, memMB=1)
    assert "cpu.small" in _named_resource_factories  # the builtins are in the same registry
    nr.reload()
    assert "gpu_x2" not in named_resources
    assert named_resources["gpu.small"].cpu == 8


def test_the_registry_patched_on_specs_is_the_one_looked_up() -> None:
    only = {"p3.2xlarge": lambda: Resource(cpu=8, gpu=1, memMB=1)}
    with patch("asynctorchx.specs._named_resource_factories", only):
        assert nr.named_resources["p3.2xlarge"] == tagged("p3.2xlarge", cpu=8, gpu=1, memMB=1)
        assert list(nr.named_resources) == ["p3.2xlarge"]
        with pytest.raises(UnknownNamedResourceException, match=r"Did you mean `p3\.2xlarge`"):
            nr.named_resources["p3.2xl"]
        assert "cpu.small" not in nr.named_resources
    assert "cpu.small" in nr.named_resources


def test_torchx_class_name_looks_up_the_same_registry() -> None:
    assert isinstance(named_resources, _NamedResourcesLibrary)
    only = {"p3.16xlarge": lambda: Resource(cpu=64, gpu=8, memMB=1)}
    with patch("asynctorchx.specs._named_resource_factories", only):
        assert _NamedResourcesLibrary()["p3.16xlarge"] == tagged(
            "p3.16xlarge", cpu=64, gpu=8, memMB=1
        )
        with pytest.raises(KeyError, match=r"^No named resource found for `p316xl`\. Did you"):
            _NamedResourcesLibrary()["p316xl"]
