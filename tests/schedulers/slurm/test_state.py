"""Parsing ``squeue``/``sacct`` text and Slurm states: pure, no cluster needed.

The sample lines are what Slurm 22.05.8 prints on the cluster of ``scripts/slurm-cluster.sh``
for the formats :mod:`asynctorchx.schedulers.slurm._state` asks for.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from asynctorchx.errors import InvalidRunConfigException
from asynctorchx.schedulers.slurm._state import (
    FIELD_SEPARATOR,
    SlurmComponent,
    describe_job,
    job_order,
    job_state,
    list_job,
    parse_exit_code,
    parse_sacct,
    parse_squeue,
    sacct_start,
    slurm_state,
)
from asynctorchx.specs import AppState, EndCause, Role


def _line(
    *fields: str, times: tuple[str, str] = ("Unknown", "Unknown"), start: str = "Unknown"
) -> str:
    """One line of squeue or sacct; ``times``: its submit and end time fields, then its start."""
    return FIELD_SEPARATOR.join((*fields, *times, start))


SQUEUE = "\n".join(
    [
        _line("38+0", "RUNNING", "n1", "None", "trainer-0", "/tmp/job dir|x", "0", "0"),
        _line("38+1", "RUNNING", "n2", "None", "trainer-1", "/tmp/job dir|x", "0", "0"),
        _line("38+2", "PENDING", "", "Resources", "ps-0", "/tmp/job dir|x", "0", "0"),
        _line("40", "COMPLETED", "n3", "None", "wrap", "/root", "0", "2"),
        _line("41_3", "RUNNING", "n4", "None", "array-0", "/root", "0", "0"),
        _line("41_[4-9]", "PENDING", "", "Priority", "array-0", "/root", "0", "0"),
        "not a line",
        "",
    ]
)


def test_squeue_groups_components_by_app() -> None:
    jobs = parse_squeue(SQUEUE)
    # an array element is an app; elements squeue folds into one line are not (ask -r)
    assert sorted(jobs) == ["38", "40", "41_3"]
    assert jobs["41_3"][0].replica == ("array", 0)
    trainer0, trainer1, ps0 = jobs["38"]
    assert trainer0 == SlurmComponent(
        "38", 0, "RUNNING", "n1", "None", "trainer-0", "/tmp/job dir|x", None, 0
    )
    assert (trainer1.offset, trainer1.nodes, ps0.state, ps0.reason) == (
        1,
        "n2",
        "PENDING",
        "Resources",
    )
    assert jobs["40"] == [
        SlurmComponent("40", None, "COMPLETED", "n3", "None", "wrap", "/root", 0, 2)
    ]


def test_squeue_components_sorted_by_offset() -> None:
    text = "\n".join(
        [
            _line("7+1", "RUNNING", "n2", "None", "b-0", "/d", "0", "0"),
            _line("7+0", "RUNNING", "n1", "None", "a-0", "/d", "0", "0"),
        ]
    )
    assert [c.offset for c in parse_squeue(text)["7"]] == [0, 1]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("PENDING", AppState.PENDING),
        ("CONFIGURING", AppState.PENDING),
        ("RUNNING", AppState.RUNNING),
        ("COMPLETING", AppState.RUNNING),  # processes may still be alive
        ("COMPLETED", AppState.SUCCEEDED),
        ("FAILED", AppState.FAILED),
        ("TIMEOUT", AppState.FAILED),
        ("OUT_OF_MEMORY", AppState.FAILED),
        ("CANCELLED", AppState.CANCELLED),
        ("CANCELLED by 0", AppState.CANCELLED),  # sacct's spelling
        ("REQUEUED", AppState.PENDING),
        ("SOMETHING_NEW", AppState.UNKNOWN),
    ],
)
def test_slurm_states(state: str, expected: AppState) -> None:
    assert slurm_state(state) == expected


def test_exit_codes() -> None:
    assert parse_exit_code("0:0") == 0
    assert parse_exit_code("3:0") == 3
    assert parse_exit_code("0:15") == 128 + 15
    assert parse_exit_code("") is None
    assert parse_exit_code("n/a") is None


def test_sacct_components_take_the_batch_steps_exit_code() -> None:
    # sacct -P -n -D of a 2-component job whose component 1 exited 4 (Slurm 22.05.8)
    text = "\n".join(
        [
            _line("101+0", "FAILED", "n1", "None", "a-0", "/w", "4:0"),
            _line("101+0.batch", "FAILED", "n1", "", "batch", "", "4:0"),
            _line("101+0.0", "COMPLETED", "n1", "", "true", "", "0:0"),
            _line("101+1", "FAILED", "n2", "None", "a-1", "/w", "4:0"),
            _line("101+1.0", "FAILED", "n2", "", "sh", "", "4:0"),
        ]
    )
    first, second = parse_sacct(text)["101"]
    assert (first.state, first.exit_code, first.replica, first.restarts) == (
        "FAILED",
        4,
        ("a", 0),
        0,
    )
    assert (second.offset, second.nodes, second.exit_code, second.work_dir) == (1, "n2", 4, "/w")


def test_sacct_cancelled_job_exit_code_is_its_batch_steps_signal() -> None:
    # the job's own ExitCode is 0:0 once cancelled; scontrol (and the batch step) say 0:15
    text = "\n".join(
        [
            _line("568", "CANCELLED by 0", "n1", "None", "wrap", "/w", "0:0"),
            _line("568.batch", "CANCELLED", "n1", "", "batch", "", "0:15"),
        ]
    )
    (job,) = parse_sacct(text)["568"]
    assert (job.state, job.exit_code, job.app_state) == ("CANCELLED", 143, AppState.CANCELLED)


def test_sacct_requeued_job_is_its_last_run_with_its_restarts() -> None:
    text = "\n".join(
        [
            _line("559", "REQUEUED", "n1", "None", "sh-0", "/w", "0:0"),
            _line("559.batch", "FAILED", "n1", "", "batch", "", "2:0"),
            _line("559.0", "FAILED", "n1", "", "sh", "", "2:0"),
            _line("559", "PENDING", "None assigned", "BeginTime", "sh-0", "/w", "0:0"),
        ]
    )
    (job,) = parse_sacct(text)["559"]
    assert (job.state, job.nodes, job.exit_code, job.restarts) == ("PENDING", "", None, 1)


def test_squeue_exit_status_is_an_exit_code_once_ended() -> None:
    # squeue -O exit_code prints the wait status scontrol prints as ExitCode=code:signal
    # (Slurm 22.05.8: 768 is 3:0, 15 is 0:15), the same for every component of a job
    text = "\n".join(
        [
            _line("38+0", "FAILED", "n1", "NonZeroExitCode", "a-0", "/w", "768", "1"),
            _line("38+1", "FAILED", "n2", "NonZeroExitCode", "b-0", "/w", "768", "1"),
            _line("39", "CANCELLED", "n1", "None", "wrap", "/w", "15", "0"),
            _line("40", "RUNNING", "n1", "None", "wrap", "/w", "0", "0"),
        ]
    )
    jobs = parse_squeue(text)
    assert [(c.exit_code, c.restarts) for c in jobs["38"]] == [(3, 1), (3, 1)]
    assert jobs["39"][0].exit_code == 128 + 15
    assert jobs["40"][0].exit_code is None  # not over: no exit code yet


def test_replica_from_job_name() -> None:
    assert SlurmComponent("1", 0, "RUNNING", name="my-role-12").replica == ("my-role", 12)
    assert SlurmComponent("1", None, "RUNNING", name="wrap").replica == ("wrap", 0)


def test_job_state_prefers_failed_once_all_ended() -> None:
    def job(*states: str) -> list[SlurmComponent]:
        return [SlurmComponent("1", i, s) for i, s in enumerate(states)]

    assert job_state(job("FAILED", "CANCELLED")) == AppState.FAILED
    assert job_state(job("CANCELLED", "CANCELLED")) == AppState.CANCELLED
    assert job_state(job("COMPLETED", "RUNNING")) == AppState.RUNNING
    assert job_state(job("COMPLETED", "COMPLETED")) == AppState.SUCCEEDED
    assert job_state(job("PENDING", "PENDING")) == AppState.PENDING


@pytest.mark.parametrize(
    ("states", "cause"),
    [
        (("COMPLETED", "COMPLETED"), EndCause.EXITED),
        (("FAILED", "CANCELLED"), EndCause.EXITED),  # the failed one decided it
        (("CANCELLED by 0", "CANCELLED"), EndCause.CANCELLED),
        (("TIMEOUT", "CANCELLED"), EndCause.TIMED_OUT),
        (("CANCELLED", "OUT_OF_MEMORY"), EndCause.OUT_OF_MEMORY),
        (("NODE_FAIL",), EndCause.NODE_LOST),
        (("BOOT_FAIL",), EndCause.NODE_LOST),
        (("PREEMPTED",), EndCause.PREEMPTED),
        (("DEADLINE",), EndCause.TIMED_OUT),
        (("SPECIAL_EXIT",), None),
        (("COMPLETED", "RUNNING"), None),  # not ended
        (("PENDING",), None),
    ],
)
def test_why_a_job_ended_is_its_deciding_components_state(
    states: tuple[str, ...], cause: EndCause | None
) -> None:
    components = [SlurmComponent("1", i, state) for i, state in enumerate(states)]
    assert describe_job("1", components).cause == cause


def test_describe_job_reports_roles_replicas_and_hosts() -> None:
    components = parse_squeue(SQUEUE)["38"]
    response = describe_job("38", components)
    assert response.app_id == "38"
    assert response.state == AppState.RUNNING
    assert response.msg == "RUNNING"
    assert [(r.name, r.num_replicas) for r in response.roles] == [("trainer", 2), ("ps", 1)]
    trainer, ps = response.roles_statuses
    assert [(r.id, r.hostname, r.state) for r in trainer.replicas] == [
        (0, "n1", AppState.RUNNING),
        (1, "n2", AppState.RUNNING),
    ]
    assert [(r.id, r.state) for r in ps.replicas] == [(0, AppState.PENDING)]


def test_describe_job_keeps_submitted_roles_and_exit_codes() -> None:
    roles = [Role(name="echo", image="/tmp", num_replicas=1)]
    components = [
        SlurmComponent("9", None, "FAILED", "n1", "NonZeroExitCode", "echo-0", "/w", 3, 0)
    ]
    response = describe_job("9", components, roles=roles)
    assert response.state == AppState.FAILED
    assert response.msg == "FAILED (NonZeroExitCode)"
    assert response.roles == roles
    assert response.num_restarts == 0
    (replica,) = response.roles_statuses[0].replicas
    assert (replica.exit_code, replica.state, replica.hostname) == (3, AppState.FAILED, "n1")


@pytest.mark.parametrize(
    ("history", "start"),
    [("1days", "now-1days"), ("90", "now-90"), (" 2weeks ", "now-2weeks"), ("0", None)],
)
def test_history_is_sacct_starttime_or_none(history: str, start: str | None) -> None:
    assert sacct_start(history) == start


@pytest.mark.parametrize("history", ["-1days", "1 day", "yesterday", "", "1d"])
def test_bad_history_names_the_option_and_the_form(history: str) -> None:
    with pytest.raises(InvalidRunConfigException, match=r"'history'.*7days") as caught:
        sacct_start(history)
    assert caught.value.cfg_key == "history"


def test_sacct_batch_step_without_exit_code_leaves_the_jobs() -> None:
    # the second run of a job requeued once (max_retries=1) that failed again
    text = "\n".join(
        [
            _line("688", "REQUEUED", "n1", "None", "bad-0", "/w", "0:0"),
            _line("688.batch", "FAILED", "n1", "", "batch", "", "2:0"),
            _line("688.0", "FAILED", "n1", "", "sh", "", "2:0"),
            _line("688", "FAILED", "n1", "None", "bad-0", "/w", "1:0"),
            _line("688.batch", "CANCELLED", "n1", "", "batch", "", ""),
        ]
    )
    (job,) = parse_sacct(text)["688"]
    assert (job.state, job.exit_code, job.restarts) == ("FAILED", 1, 1)


def test_list_job_takes_name_and_submit_of_the_first_component_and_end_once_all_ended() -> None:
    submit, first_end, last_end = (
        "2024-05-01T10:00:00",
        "2024-05-01T10:05:00",
        "2024-05-01T10:07:00",
    )
    text = "\n".join(
        [
            _line(
                "50+0", "COMPLETED", "n1", "None", "a-0", "/w", "0", "0", times=(submit, first_end)
            ),
            _line("50+1", "RUNNING", "n2", "None", "b-0", "/w", "0", "0", times=(submit, last_end)),
            _line("51", "FAILED", "n1", "None", "wrap", "/w", "256", "0", times=(submit, last_end)),
            _line(
                "52", "PENDING", "", "Priority", "x-0", "/w", "0", "0", times=("Unknown", "Unknown")
            ),
        ]
    )
    jobs = parse_squeue(text)
    at = datetime.fromisoformat(submit).astimezone(UTC)  # Slurm prints this host's local time
    running = list_job("50", jobs["50"])
    assert (running.name, running.state, running.submitted, running.ended) == (
        "a-0",
        AppState.RUNNING,
        at,
        None,  # squeue's end of a running component is its time limit's, not an end
    )
    assert jobs["50"][0].ended == datetime.fromisoformat(first_end).astimezone(UTC)
    ended = list_job("51", jobs["51"])
    assert (ended.name, ended.state, ended.submitted) == ("wrap", AppState.FAILED, at)
    assert ended.ended == datetime.fromisoformat(last_end).astimezone(UTC)
    assert ended.submitted is not None
    assert ended.submitted.tzinfo == UTC
    pending = list_job("52", jobs["52"])
    assert (pending.submitted, pending.ended) == (None, None)


@pytest.mark.parametrize("end", ["Unknown", "None", "N/A", ""])
def test_sacct_times_and_their_unknowns(end: str) -> None:
    text = "\n".join(
        [
            _line(
                "60",
                "CANCELLED by 0",
                "n1",
                "None",
                "sh-0",
                "/w",
                "0:0",
                times=("2024-05-01T10:00:00", end),
            ),
            _line(
                "60.batch",
                "CANCELLED",
                "n1",
                "",
                "batch",
                "",
                "0:15",
                times=("2024-05-01T10:00:00", end),
            ),
            _line(
                "61",
                "COMPLETED",
                "n1",
                "None",
                "sh-0",
                "/w",
                "0:0",
                times=("Unknown", "2024-05-01T11:00:00"),
            ),
        ]
    )
    jobs = parse_sacct(text)
    cancelled, done = list_job("60", jobs["60"]), list_job("61", jobs["61"])
    assert cancelled.submitted == datetime.fromisoformat("2024-05-01T10:00:00").astimezone(UTC)
    assert cancelled.ended is None
    assert done.submitted is None
    assert done.ended == datetime.fromisoformat("2024-05-01T11:00:00").astimezone(UTC)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)  # Slurm prints this host's local time


def test_pending_reason_and_times_of_squeue() -> None:
    submit, start, end = "2024-05-01T10:00:00", "2024-05-01T10:01:00", "2024-05-01T10:02:00"
    forecast = "2024-05-01T11:00:00"  # a pending job's StartTime is a forecast, not a start
    text = "\n".join(
        [
            _line(
                "70",
                "PENDING",
                "",
                "BeginTime",
                "a-0",
                "/w",
                "0",
                "0",
                times=(submit, forecast),
                start=forecast,
            ),
            _line(
                "71+0",
                "COMPLETED",
                "n1",
                "None",
                "a-0",
                "/w",
                "0",
                "0",
                times=(submit, end),
                start=start,
            ),
            _line(
                "71+1",
                "COMPLETED",
                "n2",
                "None",
                "a-1",
                "/w",
                "0",
                "0",
                times=(submit, start),
                start=submit,
            ),
            _line(
                "72",
                "RUNNING",
                "n1",
                "None",
                "a-0",
                "/w",
                "0",
                "0",
                times=(submit, forecast),
                start=start,
            ),
        ]
    )
    jobs = parse_squeue(text)
    pending = describe_job("70", jobs["70"])
    assert (pending.state, pending.pending_reason) == (AppState.PENDING, "BeginTime")
    assert (pending.submitted, pending.started, pending.ended) == (_utc(submit), None, None)
    done = describe_job("71", jobs["71"])
    assert (done.pending_reason, done.submitted, done.started, done.ended) == (
        None,
        _utc(submit),
        _utc(submit),  # the first component's start
        _utc(end),  # the last one's end
    )
    first = done.roles_statuses[0].replicas[0]
    assert (first.started, first.ended) == (_utc(start), _utc(end))
    running = describe_job("72", jobs["72"])
    assert (running.pending_reason, running.started, running.ended) == (None, _utc(start), None)


def test_sacct_start_only_of_a_job_that_ran() -> None:
    submit, start, end = "2024-05-01T10:00:00", "2024-05-01T10:01:00", "2024-05-01T10:02:00"
    text = "\n".join(
        [
            _line(
                "80",
                "COMPLETED",
                "n1",
                "None",
                "a-0",
                "/w",
                "0:0",
                times=(submit, end),
                start=start,
            ),
            _line(
                "81",
                "CANCELLED by 0",
                "None assigned",
                "BeginTime",
                "a-0",
                "/w",
                "0:0",
                times=(submit, end),
                start=end,
            ),
        ]
    )
    jobs = parse_sacct(text)
    done = describe_job("80", jobs["80"])
    assert (done.submitted, done.started, done.ended) == (_utc(submit), _utc(start), _utc(end))
    never_ran = describe_job("81", jobs["81"])
    assert (never_ran.state, never_ran.pending_reason) == (AppState.CANCELLED, None)
    assert (never_ran.started, never_ran.ended) == (None, _utc(end))


def test_sacct_reads_array_elements_and_their_batch_step() -> None:
    text = "\n".join(
        [
            _line("41_2", "FAILED", "n1", "NonZeroExitCode", "a-0", "/d", "3:0"),
            _line("41_2.batch", "FAILED", "n1", "", "batch", "", "3:0"),
        ]
    )
    (element,) = parse_sacct(text)["41_2"]
    assert (element.state, element.exit_code, element.restarts) == ("FAILED", 3, 0)


def test_app_ids_sort_as_slurm_numbers_jobs() -> None:
    assert sorted(["10_10", "9", "10_2", "10"], key=job_order) == ["9", "10", "10_2", "10_10"]
