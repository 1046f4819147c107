"""The JobSet state table without I/O: conditions, suspension, readiness, pods by index."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from asynctorchx.schedulers.api import DescribeAppResponse
from asynctorchx.schedulers.kubernetes._jobset import (
    ANNOTATION_COMPLETION_INDEX,
    JOBSET_STATE,
    LABEL_JOBSET_NAME,
    LABEL_REPLICATED_JOB,
    build_jobset,
    jobset_case,
    jobset_replicas,
    parse_jobset,
)
from asynctorchx.schedulers.kubernetes._state import ANNOTATION_FAILED, Pod, describe
from asynctorchx.specs import AppDef, AppState, Role

T0 = 1767225600.0


def jobset(
    status: dict[str, Any] | None = None, queue: str | None = None, suspend: bool | None = None
) -> dict[str, Any]:
    app = AppDef("app", roles=[Role("trainer", image="img", entrypoint="sh", num_replicas=2)])
    resource = build_jobset(app, {"queue": queue} if queue else {}, "app-x").resource
    if suspend is not None:
        resource["spec"]["suspend"] = suspend
    if status is not None:
        resource["status"] = status
    return resource


def condition(kind: str, message: str = "", status: str = "True") -> dict[str, str]:
    return {"type": kind, "status": status, "reason": kind, "message": message}


def counts(**values: int) -> dict[str, Any]:
    return {"replicatedJobsStatus": [{"name": "trainer", **values}], "restarts": 0}


def pod(index: int, phase: str, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"app-x-trainer-0-{index}-{phase.lower()[:5]}",
            "creationTimestamp": created,
            "labels": {LABEL_REPLICATED_JOB: "trainer", LABEL_JOBSET_NAME: "app-x"},
            "annotations": {ANNOTATION_COMPLETION_INDEX: str(index)},
        },
        "spec": {"hostname": f"app-x-trainer-0-{index}", "subdomain": "app-x"},
        "status": {"phase": phase},
    }


def stopped_for_a_pod() -> dict[str, Any]:
    resource = jobset(counts(suspended=1), suspend=True)
    resource["metadata"]["annotations"] = {ANNOTATION_FAILED: "trainer/0 InvalidImageName: x"}
    return resource


def parsed(pods: dict[str, dict[str, Any]]) -> dict[str, Pod]:
    return {name: Pod.parse(each) for name, each in pods.items()}


def describe_jobset(resource: dict[str, Any], pods: dict[str, Pod]) -> DescribeAppResponse:
    jobset = parse_jobset(resource)
    return describe("default:jobset:app-x", jobset, jobset_replicas(jobset, pods), T0)


@pytest.mark.parametrize(
    ("resource", "case"),
    [
        (jobset(), "NoStatus"),
        (jobset(queue="q"), "Suspended"),  # created suspended for Kueue, no status yet
        (jobset(counts(suspended=1), suspend=False), "Starting"),
        (jobset({"conditions": [condition("Suspended")]}, suspend=False), "Suspended"),
        (jobset(counts(active=1)), "Starting"),
        (jobset(counts(active=1, ready=1)), "AllJobsReady"),
        (jobset(counts(succeeded=1)), "AllJobsReady"),
        (
            jobset({"conditions": [condition("Completed")], "terminalState": "Completed"}),
            "Completed",
        ),
        (jobset({"conditions": [condition("Failed")]}), "Failed"),
        (jobset({"terminalState": "Failed"}, queue="q"), "Failed"),  # an end beats suspend
        (jobset({"conditions": [condition("Completed", status="False")], **counts()}), "Starting"),
    ],
)
def test_each_jobset_shows_its_row(resource: dict[str, Any], case: str) -> None:
    assert jobset_case(resource) == case
    assert parse_jobset(resource).state == JOBSET_STATE[case]


def test_a_jobset_the_scheduler_stopped_for_a_pod_reads_failed_with_the_reason() -> None:
    stopped = parse_jobset(stopped_for_a_pod())  # suspended by the scheduler
    assert (stopped.state, stopped.failed) == (AppState.FAILED, "trainer/0 InvalidImageName: x")


def test_the_table() -> None:
    assert dict(JOBSET_STATE) == {
        "Completed": AppState.SUCCEEDED,
        "Failed": AppState.FAILED,
        "Suspended": AppState.PENDING,
        "NoStatus": AppState.SUBMITTED,
        "AllJobsReady": AppState.RUNNING,
        "Starting": AppState.PENDING,
    }


def test_a_suspended_jobset_says_it_waits_for_its_queue() -> None:
    assert parse_jobset(jobset(queue="team-a")).said == (
        "waiting for Kueue to admit it from queue 'team-a' (the JobSet is suspended)"
    )
    assert parse_jobset(jobset(suspend=True)).said == "the JobSet is suspended (spec.suspend)"
    failed = jobset({"conditions": [condition("Failed", "jobset failed due to x")]})
    assert parse_jobset(failed).said == "jobset failed due to x"
    assert parse_jobset(jobset(counts(active=1))).said is None


def test_replicas_come_from_their_index_and_the_newest_pod_wins() -> None:
    retried = pod(1, "Running", created="2026-01-01T00:01:00Z")
    pods = {
        "a": pod(0, "Succeeded"),
        "b": pod(1, "Failed"),
        "c": retried,
        "other": {"metadata": {"name": "other", "labels": {}, "annotations": {}}},
    }
    found = jobset_replicas(parse_jobset(jobset()), parsed(pods))
    assert set(found) == {("trainer", 0), ("trainer", 1)}
    assert found[("trainer", 1)] == Pod.parse(retried)
    other = pod(0, "Running")
    other["metadata"]["labels"][LABEL_JOBSET_NAME] = "another"  # same role, another JobSet
    assert jobset_replicas(parse_jobset(jobset()), parsed({"o": other})) == {
        ("trainer", 0): None,
        ("trainer", 1): None,
    }


def test_describe_reports_replicas_hostnames_and_waiting_reasons() -> None:
    waiting = pod(1, "Pending")
    waiting["status"]["containerStatuses"] = [
        {"name": "trainer", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "m"}}}
    ]
    resource = jobset(counts(active=1))
    response = describe_jobset(resource, parsed({"a": pod(0, "Running"), "b": waiting}))
    assert response.state == AppState.PENDING
    assert response.msg == "trainer/1 ImagePullBackOff: m"
    (role,) = response.roles_statuses
    assert [(r.id, r.state, r.hostname) for r in role.replicas] == [
        (0, AppState.RUNNING, "app-x-trainer-0-0.app-x"),
        (1, AppState.PENDING, "app-x-trainer-0-1.app-x"),
    ]
    invalid = pod(1, "Pending")
    invalid["status"]["containerStatuses"] = [
        {"name": "trainer", "state": {"waiting": {"reason": "InvalidImageName", "message": "bad"}}}
    ]
    failed = describe_jobset(resource, parsed({"b": invalid}))
    assert (failed.state, failed.msg) == (AppState.FAILED, "trainer/1 InvalidImageName: bad")
    assert failed.roles_statuses[0].replicas[0].state == AppState.FAILED  # no pod, app over
    ended = jobset({"conditions": [condition("Completed", "done")], "restarts": 2})
    done = describe_jobset(ended, parsed({"b": invalid}))
    assert (done.state, done.msg, done.num_restarts) == (AppState.SUCCEEDED, "done", 2)


def test_on_a_creation_time_tie_the_pod_that_has_not_failed_is_the_replica() -> None:
    replacement = pod(0, "Pending")
    replacement["metadata"]["name"] = "app-x-trainer-0-0-new"
    for order in ([pod(0, "Failed"), replacement], [replacement, pod(0, "Failed")]):
        pods = parsed({each["metadata"]["name"]: each for each in order})
        found = jobset_replicas(parse_jobset(jobset()), pods)
        assert found[("trainer", 0)] == Pod.parse(replacement)


def test_a_jobset_ends_at_its_terminal_condition() -> None:
    done = condition("Completed")
    done["lastTransitionTime"] = "2026-01-01T00:05:00Z"
    resource = jobset({**counts(succeeded=2), "conditions": [done]})
    resource["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    parsed = parse_jobset(resource)
    assert (parsed.state, parsed.app_name) == (AppState.SUCCEEDED, "app")
    assert parsed.created == datetime(2026, 1, 1, tzinfo=UTC)
    assert parsed.ended == datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    assert parse_jobset(jobset(counts(active=2))).ended is None
