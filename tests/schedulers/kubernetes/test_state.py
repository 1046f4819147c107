"""The ``kubernetes`` state tables without I/O: why a pod waits, and when that ends the app."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from asynctorchx.schedulers.api import DescribeAppResponse
from asynctorchx.schedulers.kubernetes._request import app_to_resource
from asynctorchx.schedulers.kubernetes._state import (
    ANNOTATION_FAILED,
    ANNOTATION_PULL_TIMEOUT,
    WAITING_REASONS,
    Pod,
    Verdict,
    describe,
    job_replicas,
    parse_job,
    pod_failure,
)
from asynctorchx.specs import AppDef, AppState, EndCause, Role

CREATED = "2026-01-01T00:00:00Z"
T0 = 1767225600.0  # CREATED in epoch seconds


def waiting_pod(reason: str, message: str = "") -> Pod:
    return Pod.parse(
        {
            "metadata": {"name": "p", "creationTimestamp": CREATED},
            "spec": {},
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {"name": "c", "state": {"waiting": {"reason": reason, "message": message}}}
                ],
            },
        }
    )


def unschedulable_pod(message: str) -> Pod:
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
    }
    return Pod.parse(
        {
            "metadata": {"name": "p", "creationTimestamp": CREATED},
            "status": {"phase": "Pending", "conditions": [condition]},
        }
    )


def ended_pod(phase: str, container: dict[str, Any]) -> Pod:
    """A pod whose one container's status is ``container`` (its ``state``, ``lastState``)."""
    status = {"phase": phase, "containerStatuses": [{"name": "c", **container}]}
    return Pod.parse({"metadata": {"name": "p", "creationTimestamp": CREATED}, "status": status})


def job(phase: str | None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    app = AppDef("app", roles=[Role("trainer", image="img", entrypoint="sh", num_replicas=2)])
    resource = app_to_resource(app, "default", None, job_name="app-x")
    resource["metadata"]["annotations"] = annotations or {}
    if phase is not None:
        resource["status"] = {"state": {"phase": phase}}
    return resource


def describe_job(job: dict[str, Any], pods: dict[str, Pod], now: float) -> DescribeAppResponse:
    parsed = parse_job(job)
    return describe("default:app-x", parsed, job_replicas(parsed, pods), now)


@pytest.mark.parametrize(
    ("reason", "verdict"),
    [
        ("ErrImagePull", Verdict.FAIL_AFTER_PULL_TIMEOUT),
        ("ImagePullBackOff", Verdict.FAIL_AFTER_PULL_TIMEOUT),
        ("InvalidImageName", Verdict.FAIL),
        ("ErrImageNeverPull", Verdict.FAIL),
        ("CreateContainerConfigError", Verdict.SHOW),
        ("CrashLoopBackOff", Verdict.SHOW),
        ("Unschedulable", Verdict.SHOW),
    ],
)
def test_each_reason_has_its_verdict(reason: str, verdict: Verdict) -> None:
    assert WAITING_REASONS[reason] is verdict


def test_waiting_reasons_come_from_containers_and_the_scheduled_condition() -> None:
    assert waiting_pod("ErrImagePull", "not found").waiting == (
        "ErrImagePull",
        "not found",
    )
    assert unschedulable_pod("0/3 nodes are available").waiting == (
        "Unschedulable",
        "0/3 nodes are available",
    )
    # a normal start is no reason to report
    assert waiting_pod("ContainerCreating").waiting is None


def test_unrecoverable_reasons_fail_at_once_pull_failures_after_the_timeout() -> None:
    assert pod_failure(waiting_pod("InvalidImageName", "bad"), None, T0) == "InvalidImageName: bad"
    pulling = waiting_pod("ImagePullBackOff", "Back-off pulling image")
    assert pod_failure(pulling, None, T0 + 10_000) is None  # no timeout: never
    assert pod_failure(pulling, 60, T0 + 59) is None
    assert pod_failure(pulling, 60, T0 + 60) == (
        "ImagePullBackOff for longer than the image pull timeout (60 s): Back-off pulling image"
    )
    assert pod_failure(waiting_pod("CreateContainerConfigError"), 60, T0 + 600) is None


def test_a_waiting_reason_shows_in_the_replica_and_app_messages() -> None:
    pods = {"app-x-trainer-0-0": waiting_pod("ErrImagePull", "pull access denied")}
    response = describe_job(job("Pending"), pods, T0)
    assert response.state == AppState.PENDING
    replica = response.roles_statuses[0].replicas[0]
    assert replica.state == AppState.PENDING
    assert replica.structured_error_msg == "ErrImagePull: pull access denied"
    assert response.msg == "trainer/0 ErrImagePull: pull access denied"


def test_an_invalid_image_fails_the_app_with_the_reason() -> None:
    pods = {
        "app-x-trainer-0-0": waiting_pod("ContainerCreating"),
        "app-x-trainer-1-0": waiting_pod("InvalidImageName", 'invalid image "A:"'),
    }
    response = describe_job(job("Pending"), pods, T0)
    assert response.state == AppState.FAILED
    assert response.msg == 'trainer/1 InvalidImageName: invalid image "A:"'
    failed = response.roles_statuses[0].replicas[1]
    assert (failed.state, failed.structured_error_msg) == (
        AppState.FAILED,
        'InvalidImageName: invalid image "A:"',
    )
    assert response.roles_statuses[0].replicas[0].state == AppState.PENDING


def test_a_pull_failure_fails_the_app_after_the_jobs_timeout() -> None:
    pods = {"app-x-trainer-0-0": waiting_pod("ErrImagePull", "not found")}
    timed = job("Pending", {ANNOTATION_PULL_TIMEOUT: "30"})
    assert describe_job(timed, pods, T0 + 29).state == AppState.PENDING
    late = describe_job(timed, pods, T0 + 31)
    assert late.state == AppState.FAILED
    assert "image pull timeout (30 s)" in late.msg


def test_the_failure_annotation_outlives_the_aborted_jobs_pods() -> None:
    aborted = job("Aborted", {ANNOTATION_FAILED: "trainer/0 InvalidImageName: bad"})
    response = describe_job(aborted, {}, T0)
    assert response.state == AppState.FAILED
    assert response.msg == "trainer/0 InvalidImageName: bad"
    assert {r.state for r in response.roles_statuses[0].replicas} == {AppState.FAILED}


def test_a_job_volcano_ended_is_not_judged_again() -> None:
    pods = {"app-x-trainer-0-0": waiting_pod("InvalidImageName", "bad")}
    assert describe_job(job("Aborted"), pods, T0).state == AppState.CANCELLED


def test_a_container_killed_at_its_memory_limit_shows_the_kubelets_reason() -> None:
    oom = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    pods = {"app-x-trainer-0-0": ended_pod("Failed", {"state": oom})}
    response = describe_job(job("Failed"), pods, T0)
    assert response.state == AppState.FAILED
    replica = response.roles_statuses[0].replicas[0]
    assert (replica.state, replica.exit_code) == (AppState.FAILED, 137)
    assert replica.structured_error_msg == "OOMKilled (exit code 137)"
    assert response.msg == "trainer/0 OOMKilled (exit code 137)"


def test_a_termination_message_follows_the_reason_and_a_success_shows_nothing() -> None:
    wrote = {"terminated": {"exitCode": 2, "reason": "Error", "message": "no data\n"}}
    assert ended_pod("Failed", {"state": wrote}).why == "Error (exit code 2): no data"
    done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    assert ended_pod("Succeeded", {"state": done}).why is None


def test_a_crash_looping_container_shows_the_back_off_and_its_last_end() -> None:
    back_off = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}}
    last = {"terminated": {"exitCode": 1, "reason": "Error"}}
    pods = {"app-x-trainer-0-0": ended_pod("Running", {"state": back_off, "lastState": last})}
    response = describe_job(job("Running"), pods, T0)
    assert response.state == AppState.RUNNING  # the kubelet restarts it: not an end
    replica = response.roles_statuses[0].replicas[0]
    assert (replica.state, replica.exit_code) == (AppState.RUNNING, None)
    why = "CrashLoopBackOff: back-off 10s (last end: Error (exit code 1))"
    assert replica.structured_error_msg == why
    assert response.msg == f"trainer/0 {why}"


def test_a_cancelled_apps_message_is_not_the_end_the_cancel_gave_its_containers() -> None:
    killed = {"terminated": {"exitCode": 143, "reason": "Error"}}
    pods = {"app-x-trainer-0-0": ended_pod("Failed", {"state": killed})}  # still terminating
    response = describe_job(job("Aborted"), pods, T0)
    assert (response.state, response.msg) == (AppState.CANCELLED, "cancelled")


def disrupted_pod(reason: str) -> Pod:
    """A failed pod with a ``DisruptionTarget`` condition of ``reason`` (Kubernetes 1.26+)."""
    condition = {"type": "DisruptionTarget", "status": "True", "reason": reason}
    killed = {"terminated": {"exitCode": 137, "reason": "Error"}}
    status = {
        "phase": "Failed",
        "conditions": [condition],
        "containerStatuses": [{"name": "c", "state": killed}],
    }
    return Pod.parse({"metadata": {"name": "p", "creationTimestamp": CREATED}, "status": status})


@pytest.mark.parametrize(
    ("pod", "cause"),
    [
        (disrupted_pod("PreemptionByScheduler"), EndCause.PREEMPTED),
        (disrupted_pod("EvictionByEvictionAPI"), EndCause.EVICTED),
        (disrupted_pod("DeletionByTaintManager"), EndCause.NODE_LOST),
        (
            ended_pod(
                "Failed", {"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
            ),
            EndCause.OUT_OF_MEMORY,
        ),
        (
            ended_pod("Failed", {"state": {"terminated": {"exitCode": 2, "reason": "Error"}}}),
            EndCause.EXITED,
        ),
        (waiting_pod("InvalidImageName", "bad"), EndCause.IMAGE_PULL_FAILED),
    ],
    ids=["preempted", "evicted", "node-lost", "oom", "exit", "image"],
)
def test_why_a_failed_app_ended_is_its_first_pods_cause(pod: Pod, cause: EndCause) -> None:
    response = describe_job(job("Failed"), {"app-x-trainer-0-0": pod}, T0)
    assert (response.state, response.cause) == (AppState.FAILED, cause)


def test_an_evicted_pods_status_reason_and_a_deadline_say_why() -> None:
    evicted = Pod.parse(
        {"metadata": {"name": "p"}, "status": {"phase": "Failed", "reason": "Evicted"}}
    )
    late = Pod.parse(
        {"metadata": {"name": "p"}, "status": {"phase": "Failed", "reason": "DeadlineExceeded"}}
    )
    assert (evicted.cause, late.cause) == (EndCause.EVICTED, EndCause.TIMED_OUT)


def test_a_running_or_succeeded_app_says_no_failure_cause() -> None:
    done = ended_pod("Succeeded", {"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}})
    assert describe_job(job("Completed"), {"app-x-trainer-0-0": done}, T0).cause == EndCause.EXITED
    assert describe_job(job("Running"), {}, T0).cause is None


def test_a_job_reads_its_app_name_creation_and_terminal_transition() -> None:
    resource = job("Running")
    resource["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    resource["status"]["state"]["lastTransitionTime"] = "2026-01-01T00:01:00Z"
    running = parse_job(resource)
    assert (running.app_name, running.ended) == ("app", None)  # a running phase's: no end
    assert running.created == datetime(2026, 1, 1, tzinfo=UTC)
    resource["status"]["state"] = {
        "phase": "Completed",
        "lastTransitionTime": "2026-01-01T00:05:00Z",
    }
    assert parse_job(resource).ended == datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    assert parse_job(job("Completed")).ended is None  # the API gave no time


def test_a_pending_app_says_its_pods_unschedulable_message() -> None:
    message = "0/1 nodes are available: 1 Insufficient cpu."
    pending = describe_job(job("Pending"), {"app-x-trainer-0-0": unschedulable_pod(message)}, T0)
    assert pending.pending_reason == f"Unschedulable: {message}"
    running = describe_job(job("Running"), {"app-x-trainer-0-0": unschedulable_pod(message)}, T0)
    assert running.pending_reason is None  # only while PENDING


def _at(minute: int) -> str:
    return f"2026-01-01T00:{minute:02d}:00Z"


def test_times_of_the_job_and_its_pods_containers() -> None:
    resource = job("Completed")
    resource["metadata"]["creationTimestamp"] = _at(0)
    resource["status"]["state"]["lastTransitionTime"] = _at(9)
    two = {
        "phase": "Succeeded",
        "containerStatuses": [
            {"name": "c", "state": {"terminated": {"startedAt": _at(2), "finishedAt": _at(5)}}},
            {"name": "s", "state": {"terminated": {"startedAt": _at(3), "finishedAt": _at(7)}}},
        ],
    }
    one_left = {
        "phase": "Running",
        "containerStatuses": [
            {"name": "c", "state": {"terminated": {"startedAt": _at(1), "finishedAt": _at(4)}}},
            {"name": "s", "state": {"running": {"startedAt": _at(3)}}},
        ],
    }
    pods = {
        "app-x-trainer-0-0": Pod.parse({"metadata": {"name": "a"}, "status": two}),
        "app-x-trainer-1-0": Pod.parse({"metadata": {"name": "b"}, "status": one_left}),
    }
    at = [datetime(2026, 1, 1, 0, minute, tzinfo=UTC) for minute in range(10)]
    assert (pods["app-x-trainer-0-0"].started, pods["app-x-trainer-0-0"].finished) == (at[2], at[7])
    assert (pods["app-x-trainer-1-0"].started, pods["app-x-trainer-1-0"].finished) == (at[1], None)
    done = describe_job(resource, pods, T0)
    assert (done.submitted, done.started, done.ended) == (at[0], at[1], at[9])
    first = done.roles_statuses[0].replicas[0]
    assert (first.started, first.ended) == (at[2], at[7])
