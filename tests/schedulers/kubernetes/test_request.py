"""The Volcano Job manifest: the one TorchX 0.7.0 produces for the same app, and bad input.

The comparison runs ``torchx.schedulers.kubernetes_scheduler.KubernetesScheduler`` in its
own venv (a subprocess; TorchX needs the ``kubernetes`` package for the manifest) with its
random job-name suffix replaced by a fixed one, and serializes the manifest with the
``kubernetes`` client's ``sanitize_for_serialization``, as ``torchx`` prints it. The
deliberate differences (``docs/kubernetes.md``), normalised before comparing:

- the ``torchx.pytorch.org/version`` label holds asynctorchx's version, not TorchX's.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from asynctorchx.errors import InvalidAppIdException, InvalidRunConfigException
from asynctorchx.schedulers.kubernetes._request import (
    LABEL_ROLE_NAME,
    LABEL_VERSION,
    build_job,
    clean_name,
    make_job_name,
    parse_app_ref,
)
from asynctorchx.schedulers.kubernetes._state import parse_job, volcano_pod_name
from asynctorchx.specs import (
    AppDef,
    BindMount,
    DeviceMount,
    Resource,
    RetryPolicy,
    Role,
    VolumeMount,
)
from asynctorchx.specs.overlays import set_overlay

VENV = os.environ.get(
    "ASYNCTORCHX_TORCHX_K8S_VENV", str(Path(__file__).parents[3] / "benchmarks/.venv-torchx-k8s")
)
BUILD_VENV = (
    f"python3 -m venv {VENV} && {VENV}/bin/pip install torchx==0.7.0 kubernetes"
    " (and set ASYNCTORCHX_TORCHX_K8S_VENV to that venv)"
)
SUFFIX = "q1w2e3r4t5"

# Runs in TorchX's venv: reads the cases as JSON on stdin, prints one manifest per case.
_TORCHX_DRIVER = """
import json, sys
from torchx import specs
from torchx.schedulers import kubernetes_scheduler as k8s

k8s.make_unique = lambda name: name + "-" + sys.argv[1]
MOUNTS = {"bind": specs.BindMount, "volume": specs.VolumeMount, "device": specs.DeviceMount}
out = []
for case in json.load(sys.stdin):
    roles = []
    for spec in case["app"]["roles"]:
        spec = dict(spec)
        if "resource" in spec:
            spec["resource"] = specs.Resource(**spec["resource"])
        if "retry_policy" in spec:
            spec["retry_policy"] = specs.RetryPolicy(spec["retry_policy"])
        spec["mounts"] = [MOUNTS[m.pop("type")](**m) for m in spec.get("mounts", [])]
        roles.append(specs.Role(**spec))
    app = specs.AppDef(name=case["app"]["name"], roles=roles)
    request = k8s.KubernetesScheduler("test").submit_dryrun(app, case["cfg"]).request
    manifest = k8s.sanitize_for_serialization(request.resource)
    out.append({"manifest": manifest, "images": request.images_to_push})
print(json.dumps(out))
"""

_MOUNTS = {"bind": BindMount, "volume": VolumeMount, "device": DeviceMount}

CASES: list[dict[str, Any]] = [
    {
        "app": {
            "name": "echo",
            "roles": [{"name": "echo", "image": "alpine:3", "entrypoint": "echo", "args": ["hi"]}],
        },
        "cfg": {"queue": "default"},
    },
    {  # two roles, macros per replica, resources, ports, env, service account, priority
        "app": {
            "name": "Train_Job.v2",
            "roles": [
                {
                    "name": "Trainer_0",
                    "image": "pytorch/pytorch:2",
                    "entrypoint": "torchrun",
                    "args": ["--rdzv=${rank0_env}", "--id=${app_id}", "--rank=${replica_id}"],
                    "env": {"RANK0": "${rank0_env}", "IMG": "${img_root}/x"},
                    "num_replicas": 3,
                    "resource": {
                        "cpu": 4,
                        "gpu": 2,
                        "memMB": 16000,
                        "capabilities": {"node.kubernetes.io/instance-type": "p4d.24xlarge"},
                        "devices": {"vpc.amazonaws.com/efa": 4},
                    },
                    "port_map": {"tensorboard": 6006, "http": 8080},
                },
                {
                    "name": "ps",
                    "image": "pytorch/pytorch:2",
                    "entrypoint": "python",
                    "args": ["-m", "ps", "${rank0_env}"],
                    "num_replicas": 2,
                    "resource": {"cpu": 0.05, "gpu": 0, "memMB": 512},
                },
            ],
        },
        "cfg": {
            "queue": "research",
            "namespace": "team-a",
            "service_account": "trainer",
            "priority_class": "high",
        },
    },
    {  # mounts of every kind
        "app": {
            "name": "mounts",
            "roles": [
                {
                    "name": "worker",
                    "image": "busybox",
                    "entrypoint": "ls",
                    "mounts": [
                        {"type": "bind", "src_path": "/data", "dst_path": "/in", "read_only": True},
                        {"type": "volume", "src": "claim-1", "dst_path": "/out"},
                        {"type": "device", "src_path": "/dev/fuse", "dst_path": "/dev/fuse"},
                        {
                            "type": "device",
                            "src_path": "/dev/xyz",
                            "dst_path": "/dev/abc",
                            "permissions": "r",
                        },
                    ],
                }
            ],
        },
        "cfg": {"queue": "default"},
    },
    {  # retries of both policies, elastic min_replicas, local image renamed to image_repo
        "app": {
            "name": "retry",
            "roles": [
                {
                    "name": "a",
                    "image": "sha256:abcdef0123",
                    "entrypoint": "run",
                    "max_retries": 3,
                    "retry_policy": "APPLICATION",
                    "num_replicas": 2,
                    "min_replicas": 1,
                },
                {
                    "name": "b",
                    "image": "busybox",
                    "entrypoint": "run",
                    "max_retries": 2,
                    "retry_policy": "REPLICA",
                },
            ],
        },
        "cfg": {"queue": "default", "image_repo": "registry.example.com/team/app"},
    },
]


def _app(spec: dict[str, Any]) -> AppDef:
    roles = []
    for role_spec in spec["roles"]:
        fields = dict(role_spec)
        if "resource" in fields:
            fields["resource"] = Resource(**fields["resource"])
        if "retry_policy" in fields:
            fields["retry_policy"] = RetryPolicy(fields["retry_policy"])
        fields["mounts"] = [
            _MOUNTS[mount["type"]](**{k: v for k, v in mount.items() if k != "type"})
            for mount in fields.get("mounts", [])
        ]
        roles.append(Role(**fields))
    return AppDef(name=spec["name"], roles=roles)


def _ours(case: dict[str, Any]) -> dict[str, Any]:
    job = build_job(_app(case["app"]), case["cfg"], clean_name(f"{case['app']['name']}-{SUFFIX}"))
    return {
        "manifest": json.loads(str(job)),
        "images": {key: list(value) for key, value in job.images_to_push.items()},
    }


def _normalise(manifest: dict[str, Any]) -> dict[str, Any]:
    for task in manifest["spec"]["tasks"]:
        task["template"]["metadata"]["labels"][LABEL_VERSION] = "<version>"
        for container in task["template"]["spec"]["containers"]:
            # torchx-nightly's addition, which 0.7.0 lacks: compared in test_torchx_image_env
            container["env"] = [e for e in container.get("env", []) if e["name"] != "TORCHX_IMAGE"]
    return manifest


def _torchx() -> list[dict[str, Any]]:
    python = Path(VENV) / "bin" / "python"
    if not python.exists():
        if os.environ.get("ASYNCTORCHX_REQUIRE_TORCHX"):
            pytest.fail(f"no TorchX venv with kubernetes at {VENV}: {BUILD_VENV}")
        pytest.skip(f"no TorchX venv with kubernetes at {VENV}: {BUILD_VENV}")
    done = subprocess.run(
        [str(python), "-W", "ignore", "-c", _TORCHX_DRIVER, SUFFIX],
        input=json.dumps(CASES),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def test_manifests_match_torchx() -> None:
    theirs = _torchx()
    for case, their in zip(CASES, theirs, strict=True):
        ours = _ours(case)
        assert ours["images"] == their["images"], case["app"]["name"]
        assert _normalise(ours["manifest"]) == _normalise(their["manifest"]), case["app"]["name"]


def test_torchx_image_env_is_each_containers_image() -> None:
    job = build_job(_app(CASES[1]["app"]), {"queue": "q"}, "train-x")
    for task in job.resource["spec"]["tasks"]:
        container = task["template"]["spec"]["containers"][0]
        assert {"name": "TORCHX_IMAGE", "value": container["image"]} in container["env"]


def test_rank0_env_and_pod_names() -> None:
    app = _app(CASES[1]["app"])
    job = build_job(app, {"queue": "q"}, "train-x")
    tasks = job.resource["spec"]["tasks"]
    assert [task["name"] for task in tasks] == [
        "trainer0-0",
        "trainer0-1",
        "trainer0-2",
        "ps-0",
        "ps-1",
    ]
    first, second = tasks[0]["template"]["spec"], tasks[1]["template"]["spec"]
    assert {"name": "TORCHX_RANK0_HOST", "value": "localhost"} in first["containers"][0]["env"]
    assert second["containers"][0]["command"][1] == "--rdzv=VC_TRAINER0_0_HOSTS"
    assert volcano_pod_name(parse_job(job.resource), ("Trainer_0", 2)) == "train-x-trainer0-2-0"


def test_job_names_are_dns_labels() -> None:
    for name in ("a" * 200, "--Weird Name!!", "___", "UPPER.case_name"):
        job_name = make_job_name(name)
        assert len(job_name) <= 63
        assert parse_app_ref(f"default:{job_name}") == ("default", "volcano", job_name)
    assert make_job_name("echo") != make_job_name("echo")


@pytest.mark.parametrize("bad", ["default", "a:b:c", "Default:x", "ns:-x", ":x", "ns/x:y"])
def test_bad_app_ids_are_refused(bad: str) -> None:
    with pytest.raises(InvalidAppIdException):
        parse_app_ref(bad)


def test_bad_run_options() -> None:
    app = _app(CASES[0]["app"])
    with pytest.raises(InvalidRunConfigException) as missing:
        build_job(app, {})
    assert missing.value.cfg_key == "queue"
    local = _app(CASES[3]["app"])
    with pytest.raises(InvalidRunConfigException) as no_repo:
        build_job(local, {"queue": "q"})
    assert no_repo.value.cfg_key == "image_repo"
    with pytest.raises(InvalidRunConfigException, match=r"image_pull_timeout.*got -5") as bad:
        build_job(app, {"queue": "q", "image_pull_timeout": -5})
    assert bad.value.cfg_key == "image_pull_timeout"


def test_an_image_pull_timeout_is_a_job_annotation_and_only_then() -> None:
    app = _app(CASES[0]["app"])
    assert "annotations" not in build_job(app, {"queue": "q"}).resource["metadata"]
    timed = build_job(_app(CASES[0]["app"]), {"queue": "q", "image_pull_timeout": 120})
    assert timed.resource["metadata"]["annotations"] == {"asynctorchx/image-pull-timeout": "120"}


def test_a_pod_overlay_lands_in_every_pod_of_its_role_under_torchx_labels() -> None:
    app = _app(CASES[1]["app"])  # two roles
    role = app.roles[0]
    set_overlay(role, "kubernetes", "V1Pod", {"spec": {"nodeSelector": {"gpu": "a100"}}})
    set_overlay(
        role,
        "kubernetes",
        "V1Pod",
        {
            "metadata": {"labels": {LABEL_ROLE_NAME: "overridden", "team": "x"}},
            "spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
        },
    )
    tasks = build_job(app, {"queue": "q"}).resource["spec"]["tasks"]
    mine = [t for t in tasks if t["template"]["metadata"]["labels"][LABEL_ROLE_NAME] == role.name]
    assert len(mine) == role.num_replicas
    for task in mine:
        template = task["template"]
        assert template["spec"]["nodeSelector"]["gpu"] == "a100"  # merged into the selector
        assert template["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
        assert template["metadata"]["labels"]["team"] == "x"  # TorchX's labels win
    others = [t for t in tasks if t not in mine]
    assert others
    assert all("tolerations" not in t["template"]["spec"] for t in others)
