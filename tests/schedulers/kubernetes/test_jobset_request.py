"""The JobSet manifest (``job_api=jobset``) without I/O: layout, macros, Kueue, retries, names."""

from __future__ import annotations

from typing import Any

import pytest

from asynctorchx.errors import InvalidAppDefException, InvalidRunConfigException
from asynctorchx.schedulers.kubernetes._jobset import (
    ANNOTATION_COMPLETION_INDEX,
    LABEL_KUEUE_QUEUE,
    MAX_POD_NAME,
    POD_SUFFIX,
    build_jobset,
    name_budget,
)
from asynctorchx.schedulers.kubernetes._request import (
    ANNOTATION_PULL_TIMEOUT,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    LABEL_UNIQUE_NAME,
    parse_app_ref,
)
from asynctorchx.schedulers.kubernetes_scheduler import KubernetesScheduler
from asynctorchx.specs import AppDef, RetryPolicy, Role


def two_roles() -> AppDef:
    trainer = Role(
        name="trainer",
        image="img:1",
        entrypoint="torchrun",
        args=["--node_rank", "${replica_id}", "--master_addr", "$(${rank0_env})", "${app_id}"],
        env={"REPLICA": "${replica_id}"},
        num_replicas=4,
        max_retries=2,
        retry_policy=RetryPolicy.REPLICA,
    )
    ps = Role(name="ps", image="img:1", entrypoint="ps", num_replicas=1, max_retries=3)
    return AppDef(name="train", roles=[trainer, ps])


def job_spec(resource: dict[str, Any], index: int) -> dict[str, Any]:
    return dict(resource["spec"]["replicatedJobs"][index]["template"]["spec"])


def test_one_replicated_job_per_role_with_an_indexed_job_of_num_replicas_pods() -> None:
    job = build_jobset(two_roles(), {"job_api": "jobset"}, "train-x")
    resource = job.resource
    assert (resource["apiVersion"], resource["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert [rjob["name"] for rjob in resource["spec"]["replicatedJobs"]] == ["trainer", "ps"]
    assert [rjob["replicas"] for rjob in resource["spec"]["replicatedJobs"]] == [1, 1]
    trainer = job_spec(resource, 0)
    assert (trainer["parallelism"], trainer["completions"]) == (4, 4)
    assert trainer["completionMode"] == "Indexed"
    assert resource["spec"]["network"] == {"enableDNSHostnames": True}
    assert "suspend" not in resource["spec"]  # no queue: no Kueue
    assert "labels" not in resource["metadata"]
    assert job.job_api == "jobset"
    assert job.namespace == "default"


def test_replica_macros_come_from_the_completion_index_and_rank0_is_a_hostname() -> None:
    resource = build_jobset(two_roles(), {}, "train-x").resource
    container = job_spec(resource, 0)["template"]["spec"]["containers"][0]
    index_env = container["env"][0]
    assert index_env["name"] == "TORCHX_REPLICA_ID"
    assert index_env["valueFrom"]["fieldRef"]["fieldPath"] == (
        f"metadata.annotations['{ANNOTATION_COMPLETION_INDEX}']"
    )
    env = {each["name"]: each.get("value") for each in container["env"]}
    assert env["REPLICA"] == "$(TORCHX_REPLICA_ID)"  # expanded: defined after the index
    assert env["TORCHX_RANK0_HOST"] == "train-x-trainer-0-0.train-x"
    assert container["command"] == [
        "torchrun",
        "--node_rank",
        "$(TORCHX_REPLICA_ID)",
        "--master_addr",
        "$(TORCHX_RANK0_HOST)",
        "train-x",
    ]
    assert container["name"] == "trainer"
    labels = job_spec(resource, 0)["template"]["metadata"]["labels"]
    assert labels[LABEL_ROLE_NAME] == "trainer"
    assert labels[LABEL_UNIQUE_NAME] == "train-x"
    assert LABEL_REPLICA_ID not in labels  # one template for every replica


def test_retries_map_to_the_jobs_backoff_limit_or_the_jobsets_restarts() -> None:
    resource = build_jobset(two_roles(), {}, "train-x").resource
    assert job_spec(resource, 0)["backoffLimit"] == 2  # REPLICA: the pod alone
    assert job_spec(resource, 1)["backoffLimit"] == 0
    assert resource["spec"]["failurePolicy"] == {"maxRestarts": 3}  # APPLICATION: all


def test_a_queue_adds_kueues_label_and_suspends() -> None:
    cfg = {"queue": "team-a", "priority_class": "high", "image_pull_timeout": 60}
    resource = build_jobset(two_roles(), cfg, "train-x").resource
    assert resource["metadata"]["labels"] == {LABEL_KUEUE_QUEUE: "team-a"}
    assert resource["spec"]["suspend"] is True
    assert resource["metadata"]["annotations"] == {ANNOTATION_PULL_TIMEOUT: "60"}
    pod_spec = job_spec(resource, 0)["template"]["spec"]
    assert pod_spec["priorityClassName"] == "high"


def test_names_fit_jobsets_pod_name_limit_and_start_with_a_letter() -> None:
    app = AppDef(name="9" + "x" * 80, roles=[Role("worker", "img", "sh", num_replicas=12)])
    name = build_jobset(app, {}).resource["metadata"]["name"]
    assert name[0].isalpha()
    longest = f"{name}-worker-0-11"
    assert len(longest) + POD_SUFFIX <= MAX_POD_NAME
    assert len(longest) + POD_SUFFIX >= MAX_POD_NAME - 1  # the budget is used, not wasted
    assert len(name) <= name_budget(app)


def test_bad_apps_and_options_raise_typed_errors_naming_the_fix() -> None:
    digits = AppDef(name="a", roles=[Role("0ps", "img", "sh")])
    with pytest.raises(InvalidAppDefException, match=r"'0ps'.*start with a letter"):
        build_jobset(digits, {})
    twins = AppDef(name="a", roles=[Role("a_b", "img", "sh"), Role("ab", "img", "sh")])
    with pytest.raises(InvalidAppDefException, match="'ab'"):
        build_jobset(twins, {})
    long_role = AppDef(name="a", roles=[Role("r" * 60, "img", "sh")])
    with pytest.raises(InvalidAppDefException, match="shorten the role's name"):
        build_jobset(long_role, {})
    scheduler = KubernetesScheduler("test", kubeconfig="/nonexistent")
    with pytest.raises(InvalidRunConfigException, match=r"'kueue'.*volcano, jobset") as bad:
        scheduler.submit_dryrun(two_roles(), {"job_api": "kueue"})
    assert bad.value.cfg_key == "job_api"
    with pytest.raises(InvalidRunConfigException, match="queue"):
        scheduler.submit_dryrun(two_roles(), {})  # Volcano needs its queue


def test_app_ids_say_the_job_api() -> None:
    assert parse_app_ref("default:train-x") == ("default", "volcano", "train-x")
    assert parse_app_ref("team:jobset:train-x") == ("team", "jobset", "train-x")
    dryrun = KubernetesScheduler("test").submit_dryrun(two_roles(), {"job_api": "jobset"})
    assert dryrun.request.job_api == "jobset"
    assert '"kind": "JobSet"' in str(dryrun)
