"""torchx-nightly's ``reserved_millicpu``, ``reserved_memmb`` and ``efa_device_count`` run
options: their definitions and the containers' resources they give, beside nightly's, and
the pods a Kubernetes API server creates from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asynctorchx.errors import InvalidRunConfigException
from asynctorchx.schedulers.kubernetes._jobset import build_jobset
from asynctorchx.schedulers.kubernetes._request import build_job
from asynctorchx.schedulers.kubernetes_scheduler import KubernetesScheduler
from asynctorchx.specs import AppDef, AppState, Resource, Role
from asynctorchx.specs.named_resources_aws import EFA_DEVICE
from tests.nightly import run_nightly
from tests.schedulers.kubernetes.conftest import connected
from tests.schedulers.kubernetes.test_scheduler import CFG, sh_app

OPTIONS = ("reserved_millicpu", "reserved_memmb", "efa_device_count")

NIGHTLY_OPTS = """
import json, sys
from torchx.schedulers.kubernetes_scheduler import KubernetesScheduler
opts = KubernetesScheduler("s").run_opts()
keys = json.load(sys.stdin)
print(json.dumps({k: [opts.get(k).default, opts.get(k).opt_type.__name__] for k in keys}))
"""

# nightly's role_to_pod builds kubernetes.client models; attribute holders stand in for
# them, so its venv needs no kubernetes package to give the resources
NIGHTLY_PODS = """
import json, sys, types
class Model:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)
models = types.ModuleType("kubernetes.client.models")
models.__getattr__ = lambda name: type(name, (Model,), {})
sys.modules.update({"kubernetes": types.ModuleType("kubernetes"),
                    "kubernetes.client": types.ModuleType("kubernetes.client"),
                    "kubernetes.client.models": models})
from torchx.schedulers.kubernetes_scheduler import role_to_pod
from torchx.specs import Resource, Role
out = []
for case in json.load(sys.stdin):
    role = Role("r", "img", entrypoint="true", resource=Resource(**case["resource"]))
    resources = role_to_pod("r-0", role, None, **case["options"]).spec.containers[0].resources
    out.append({"limits": resources.limits, "requests": resources.requests})
print(json.dumps(out))
"""

EFA4 = {"cpu": 2, "gpu": 1, "memMB": 4096, "devices": {EFA_DEVICE: 4}}
CASES: list[dict[str, Any]] = [
    {"resource": EFA4, "options": {}},
    {"resource": EFA4, "options": {"reserved_millicpu": 0, "reserved_memmb": 0}},
    {"resource": EFA4, "options": {"reserved_millicpu": 5000, "reserved_memmb": 500}},
    {"resource": EFA4, "options": {"efa_device_count": 0}},
    {"resource": EFA4, "options": {"efa_device_count": 2}},
    {"resource": {"cpu": 1, "gpu": 0, "memMB": 100}, "options": {"efa_device_count": 1}},
]


def _app(resource: dict[str, Any]) -> AppDef:
    return AppDef("a", [Role("r", "img", entrypoint="true", resource=Resource(**resource))])


def _resources(cfg: dict[str, Any], resource: dict[str, Any], api: str = "volcano") -> Any:
    if api == "volcano":
        job = build_job(_app(resource), {"queue": "q", **cfg}, "a-x").resource
        return job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
    jobset = build_jobset(_app(resource), cfg, "a-x").resource
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return template["spec"]["containers"][0]["resources"]


def test_run_options_as_torchx_nightly_defines_them() -> None:
    opts = KubernetesScheduler("test").run_opts()
    ours = {key: [opts.get(key).default, opts.get(key).opt_type.__name__] for key in OPTIONS}  # type: ignore[union-attr]
    assert ours == run_nightly(NIGHTLY_OPTS, OPTIONS)


@pytest.mark.parametrize("api", ["volcano", "jobset"])
def test_container_resources_beside_torchx_nightly(api: str) -> None:
    ours = [_resources(case["options"], case["resource"], api) for case in CASES]
    assert ours == run_nightly(NIGHTLY_PODS, CASES)
    assert ours[1]["requests"]["cpu"] == ours[1]["limits"]["cpu"] == "2000m"
    assert ours[2]["requests"] == {"cpu": "0m", "memory": "3596M", "nvidia.com/gpu": "1"}
    assert [ours[i]["limits"].get(EFA_DEVICE) for i in (0, 3, 4, 5)] == ["4", None, "2", "1"]


@pytest.mark.parametrize(("key", "value"), [(k, v) for k in OPTIONS for v in (-1, True)])
def test_a_negative_or_boolean_value_is_refused_naming_the_option(key: str, value: object) -> None:
    with pytest.raises(InvalidRunConfigException, match=f"{key}.*got {value}") as caught:
        build_job(_app(EFA4), {"queue": "q", key: value})
    assert caught.value.cfg_key == key


async def test_the_server_creates_pods_with_these_resources(tmp_path: Path) -> None:
    async with connected(tmp_path) as (cluster, scheduler):
        app = sh_app("reserved", "true")
        app.roles[0].resource = Resource(cpu=1, gpu=0, memMB=512, devices={EFA_DEVICE: 2})
        cfg = {**CFG, "reserved_millicpu": 0, "reserved_memmb": 256, "efa_device_count": 0}
        app_id = await scheduler.submit(app, cfg)
        try:
            namespace, name = app_id.split(":")
            job = await scheduler.api.get_job(namespace, name)
            assert job is not None
            sent = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
            expected = {
                "limits": {"cpu": "1000m", "memory": "512M"},
                "requests": {"cpu": "1000m", "memory": "256M"},
            }
            assert sent == expected
            if cluster.bare is not None:  # the server validated and created the pod from it
                pending = await scheduler.wait_for_state_change(
                    app_id, AppState.SUBMITTED, timeout=60
                )
                assert pending is not None
                pod = await cluster.bare.get_pod(cluster.pod(app_id, "role0-0"))
                assert pod is not None
                resources = pod["spec"]["containers"][0]["resources"]
                assert resources["requests"] == {"cpu": "1", "memory": "256M"}
                assert EFA_DEVICE not in resources["limits"]
        finally:
            await scheduler.delete(app_id)
