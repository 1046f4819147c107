"""TorchX 0.7.0's observable behaviour of ``torchx.specs``, checked against asynctorchx.

Each expectation below was read off TorchX 0.7.0 by running it (issue 13).
"""

from __future__ import annotations

import json
import typing
from datetime import datetime

import attrs
import pytest

from asynctorchx.specs import named_resources, named_resources_aws, resource_tags
from asynctorchx.specs.api import (
    AppDryRunInfo,
    AppState,
    AppStatus,
    MalformedAppHandleException,
    ReplicaStatus,
    RoleStatus,
    UnknownAppException,
    UnknownSchedulerException,
    get_type_name,
    parse_app_handle,
    runopts,
)


@pytest.mark.parametrize(
    ("function", "name"),
    [
        ("aws_p3_2xlarge", "aws_p3.2xlarge"),
        ("aws_t3_medium", "aws_t3.medium"),
        ("aws_g4dn_metal", "aws_g4dn.metal"),
        ("aws_trn1_32xlarge", "aws_trn1.32xlarge"),
    ],
)
def test_aws_functions_are_module_attributes(function: str, name: str) -> None:
    made = getattr(named_resources_aws, function)()
    # a lookup adds the name tag, as torchx-nightly's named_resources does
    assert named_resources[name] == attrs.evolve(made, tags={resource_tags.RESOURCE_NAME: name})
    assert made is not getattr(named_resources_aws, function)()  # a fresh copy per call


def test_every_aws_name_has_its_function() -> None:
    for name, factory in named_resources_aws.NAMED_RESOURCES.items():
        assert getattr(named_resources_aws, name.replace(".", "_"))() == factory()


def test_aws_p3_2xlarge_figures() -> None:
    made = named_resources_aws.aws_p3_2xlarge()
    assert (made.cpu, made.gpu, made.memMB) == (8, 1, 61 * named_resources_aws.GiB)


def test_repr_of_a_status_is_a_yaml_block() -> None:
    status = AppStatus(AppState.FAILED, structured_error_msg='{"message": "test error"}')
    assert repr(status) == (
        "AppStatus:\n"
        "  msg: ''\n"
        "  num_restarts: 0\n"
        "  roles: []\n"
        "  state: FAILED (5)\n"
        "  structured_error_msg:\n"
        "    message: test error\n"
        "  ui_url: null\n"
    )
    assert str(status) == repr(status)


def test_repr_quotes_strings_a_yaml_reader_would_misread() -> None:
    text = repr(AppStatus(AppState.RUNNING, msg="yes", ui_url="123"))
    assert "  msg: 'yes'\n" in text
    assert "  ui_url: '123'\n" in text
    assert "  state: RUNNING (3)\n" in text


def test_repr_lists_roles_and_replicas() -> None:
    status = AppStatus(
        AppState.RUNNING,
        roles=[RoleStatus("worker", [ReplicaStatus(0, AppState.RUNNING, "worker", "host0")])],
    )
    assert (
        "  roles:\n"
        "  - replicas:\n"
        "    - exit_code: null\n"
        "      hostname: host0\n"
        "      id: 0\n"
        "      role: worker\n"
        "      state: RUNNING (3)\n"
        "      structured_error_msg: <NONE>\n"
        "    role: worker\n"
    ) in repr(status)


def _error_file(message: str, timestamp: int, error_code: int | None) -> str:
    return json.dumps(
        {
            "message": {
                "message": message,
                "extraInfo": {"timestamp": timestamp},
                "errorCode": error_code,
            }
        }
    )


def test_format_layout() -> None:
    status = AppStatus(
        AppState.FAILED,
        num_restarts=1,
        msg="boom",
        ui_url="file:///tmp/x",
        roles=[
            RoleStatus(
                "worker",
                [
                    ReplicaStatus(1, AppState.RUNNING, "worker", "host1"),
                    ReplicaStatus(
                        0,
                        AppState.FAILED,
                        "worker",
                        "host0",
                        _error_file("RuntimeError: oops", 1700000000, -1),
                    ),
                ],
            )
        ],
    )
    when = datetime.fromtimestamp(1700000000)
    assert status.format() == (
        "AppStatus:\n"
        "    State: FAILED\n"
        "    Num Restarts: 1\n"
        "    Roles: \n"
        " *worker[0]:FAILED (exitcode: -1)\n"
        f"        timestamp: {when}\n"
        "        hostname: host0\n"
        "        error_msg: RuntimeError: oops\n"
        "  worker[1]:RUNNING\n"
        "    Msg: boom\n"
        "    Structured Error Msg: <NONE>\n"
        "    UI URL: file:///tmp/x\n"
        "    "
    )


def test_format_of_an_empty_status() -> None:
    assert AppStatus(AppState.RUNNING).format() == (
        "AppStatus:\n    State: RUNNING\n    Num Restarts: 0\n    Roles: \n    Msg: \n"
        "    Structured Error Msg: <NONE>\n    UI URL: None\n    "
    )


@pytest.mark.parametrize(
    ("replica", "line"),
    [
        (ReplicaStatus(0, AppState.FAILED, "w", "h"), " *w[0]:FAILED (no reply file)"),
        (ReplicaStatus(0, AppState.CANCELLED, "w", "h"), " *w[0]:CANCELLED (no reply file)"),
        (ReplicaStatus(2, AppState.FAILED, "w", "h", exit_code=3), "  w[2]:FAILED (exitcode: 3)"),
        (ReplicaStatus(0, AppState.SUCCEEDED, "w", "h", exit_code=0), " *w[0]:SUCCEEDED"),
    ],
)
def test_format_replica_without_an_error_file(replica: ReplicaStatus, line: str) -> None:
    text = AppStatus(AppState.FAILED, roles=[RoleStatus("w", [replica])]).format()
    assert f"\n{line}\n" in text


def test_format_wraps_a_long_error_message() -> None:
    long = " ".join(["word"] * 60)
    replica = ReplicaStatus(0, AppState.FAILED, "w", "h", _error_file(long, 0, 1))
    text = AppStatus(AppState.FAILED, roles=[RoleStatus("w", [replica])]).format()
    lines = [line for line in text.splitlines() if line.strip().startswith("word")]
    assert len(lines) >= 2
    assert " ".join(line.strip() for line in lines) + "" in "error_msg: " + long + " "


def test_dryrun_info_repr_is_the_formatted_request() -> None:
    info = AppDryRunInfo({"a": 1}, lambda request: f"REQ {request}")
    assert repr(info) == str(info) == "REQ {'a': 1}"


@pytest.mark.parametrize(
    ("tp", "name"),
    [
        (list, "list"),
        (str, "str"),
        (typing.List[int], "typing.List[int]"),  # noqa: UP006
        (typing.Dict[str, int], "typing.Dict[str, int]"),  # noqa: UP006
        (typing.Union[str, int], "typing.Union[str, int]"),
        (list[str], "list[str]"),
    ],
)
def test_get_type_name(tp: object, name: str) -> None:
    assert get_type_name(tp) == name


def test_runopts_add_takes_an_empty_list_for_a_dict_option() -> None:
    opts = runopts()
    opts.add("env", type_=typing.Dict[str, str], default=[], help="envs")  # noqa: UP006
    assert opts.resolve({}) == {"env": {}}


def test_runopts_str_layout() -> None:
    opts = runopts()
    opts.add("a", type_=int, default=1, help="an int")
    opts.add("req", type_=str, help="req str", required=True)
    opts.add("l", type_=typing.List[str], default=["x"], help="a list")  # noqa: UP006
    assert (
        str(opts)
        == repr(opts)
        == (
            "    usage:\n"
            "        req=REQ,[a=A],[l=L]\n"
            "\n"
            "    required arguments:\n"
            "        req=REQ (str)\n"
            "            req str\n"
            "\n"
            "    optional arguments:\n"
            "        a=A (int, 1)\n"
            "            an int\n"
            "        l=L (typing.List[str], ['x'])\n"
            "            a list"
        )
    )


def test_exceptions_are_importable_from_specs_api() -> None:
    assert issubclass(UnknownAppException, Exception)
    assert issubclass(UnknownSchedulerException, Exception)


@pytest.mark.parametrize("handle", ["local_cwd:///app", "local_cwd://session/"])
def test_parse_app_handle_refuses_empty_parts(handle: str) -> None:
    with pytest.raises(MalformedAppHandleException):
        parse_app_handle(handle)
