"""The local dry run: each replica's role, macros substituted, seen by the image provider."""

from __future__ import annotations

from asynctorchx.schedulers.local._request import (
    CWDImageProvider,
    ReplicaParam,
    RequestContext,
    build_popen_request,
)
from asynctorchx.specs.api import AppDef, Role


class RecordingProvider(CWDImageProvider):
    """Keeps every role it is given, and scribbles on it as a careless provider might."""

    def __init__(self) -> None:
        super().__init__({})
        self.roles: list[Role] = []

    def get_replica_param(
        self,
        img_root: str,
        role: Role,
        stdout: str | None = None,
        stderr: str | None = None,
        combined: str | None = None,
    ) -> ReplicaParam:
        self.roles.append(role)
        param = super().get_replica_param(img_root, role, stdout, stderr, combined)
        role.args.append("scribbled")
        role.env["SCRIBBLED"] = "1"
        role.metadata["scribbled"] = True
        return param


def test_each_replica_gets_its_own_role_with_its_macros() -> None:
    role = Role(
        "worker",
        "image",
        entrypoint="echo",
        args=["${replica_id}", "plain"],
        env={"RANK": "rank-${replica_id}", "PLAIN": "plain"},
        metadata={"nested": {"ids": ["${app_id}/${replica_id}", 1]}},
        num_replicas=3,
    )
    app = AppDef("app", roles=[role])
    provider = RecordingProvider()
    context = RequestContext(
        app_id="app-1",
        app_log_dir="/logs/s/app-1",
        job_id="local_cwd://s/app-1",
        image_provider=provider,
    )

    request = build_popen_request(app, {}, context)

    assert [p.args for p in request.role_params["worker"]] == [
        ["echo", str(k), "plain"] for k in range(3)
    ]
    assert [p.env["RANK"] for p in request.role_params["worker"]] == ["rank-0", "rank-1", "rank-2"]
    assert [r.metadata["nested"] for r in provider.roles] == [
        {"ids": [f"app-1/{k}", 1]} for k in range(3)
    ]
    # what the provider did to one replica's role reached neither the others nor the app
    assert all(r.args.count("scribbled") == 1 for r in provider.roles)
    assert role.args == ["${replica_id}", "plain"]
    assert role.env == {"RANK": "rank-${replica_id}", "PLAIN": "plain"}
    assert role.metadata == {"nested": {"ids": ["${app_id}/${replica_id}", 1]}}
