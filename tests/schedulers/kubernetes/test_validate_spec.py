"""The run option ``validate_spec`` (torchx-nightly's): the job is sent as a server-side
dry run before it is created, its refusal an ``InvalidJobSpecError`` naming the fields;
with ``job_api=volcano`` a pod name over 63 characters is refused at dry run."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynctorchx.errors import (
    InvalidAppDefException,
    InvalidJobSpecError,
    KubernetesApiError,
)
from asynctorchx.schedulers.kubernetes_scheduler import KubernetesScheduler
from asynctorchx.specs import AppDef, Role
from tests.schedulers.kubernetes.conftest import IMAGE, connected
from tests.schedulers.kubernetes.fake_apiserver import JOBS, FakeApiServer

#: Why the refusal test runs on the fake server.
WEBHOOK = "Volcano's admission webhook refusing a queue needs the fake's webhook"


def app(name: str = "valid", role: str = "main") -> AppDef:
    return AppDef(name, roles=[Role(role, IMAGE, entrypoint="sh", args=["-c", "true"])])


async def test_the_server_refuses_a_bad_name_in_the_dry_run_naming_the_field(
    tmp_path: Path,
) -> None:
    async with connected(tmp_path) as (_, scheduler):
        info = scheduler.submit_dryrun(app(), {"queue": "default"})
        info.request.resource["metadata"]["name"] = "Not_A_DNS_Name"
        with pytest.raises(InvalidJobSpecError, match="dry run") as refused:
            await scheduler.schedule(info)
        assert refused.value.status == 422
        assert "metadata.name" in refused.value.fields
        assert isinstance(refused.value, ValueError)  # nightly's ValueError("Invalid job spec")
        assert await scheduler.api.get_job("default", "Not_A_DNS_Name") is None
        # a valid job passes the dry run and is created
        app_id = await scheduler.schedule(scheduler.submit_dryrun(app(), {"queue": "default"}))
        assert await scheduler.exists(app_id)
        await scheduler.delete(app_id)


async def test_a_refusal_creates_nothing_and_validate_spec_false_skips_the_dry_run(
    tmp_path: Path,
) -> None:
    async with (
        FakeApiServer().running(tmp_path) as server,
        KubernetesScheduler("test", kubeconfig=str(server.kubeconfig)) as scheduler,
    ):
        with pytest.raises(InvalidJobSpecError, match="unable to find job queue: nope"):
            await scheduler.submit(app(), {"queue": "nope"})
        posts = [path for method, path in server.requests if method == "POST"]
        assert posts == ["/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs?dryRun=All"]
        assert server.objects[JOBS] == {}

        server.requests.clear()
        with pytest.raises(KubernetesApiError) as refused:
            await scheduler.submit(app(), {"queue": "nope", "validate_spec": False})
        assert not isinstance(refused.value, InvalidJobSpecError)
        posts = [path for method, path in server.requests if method == "POST"]
        assert posts == ["/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"]


def test_a_pod_name_over_63_characters_is_refused_at_dry_run() -> None:
    scheduler = KubernetesScheduler("test")
    long_app = app(name="a" * 50, role="trainer")
    with pytest.raises(InvalidAppDefException, match=r"pod name .* more than the 63"):
        scheduler.submit_dryrun(long_app, {"queue": "default"})
    off = scheduler.submit_dryrun(long_app, {"queue": "default", "validate_spec": False})
    assert off.request.validate_spec is False
    assert scheduler.submit_dryrun(app(), {"queue": "default"}).request.validate_spec is True
