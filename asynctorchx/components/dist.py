"""Distributed components: ``dist.ddp``, ``dist.torchrun``, ``dist.spmd`` (torchrun).

On several nodes rank 0's host is in an environment variable, so a replica runs ``bash -c``.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable
from pathlib import Path

from asynctorchx.components import IMAGE
from asynctorchx.components.structured_arg import StructuredJArgument, StructuredNameArgument
from asynctorchx.specs import resource
from asynctorchx.specs.api import AppDef, Role, macros, parse_mounts

#: Environment variables set by ``--debug true`` to debug PyTorch runs.
TORCH_DEBUG_FLAGS: dict[str, str] = {
    "CUDA_LAUNCH_BLOCKING": "1",
    "NCCL_DESYNC_DEBUG": "1",
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
    "TORCH_SHOW_CPP_STACKTRACES": "1",
}
#: TorchX's name for :data:`TORCH_DEBUG_FLAGS`, which its documentation shows.
_TORCH_DEBUG_FLAGS: dict[str, str] = TORCH_DEBUG_FLAGS


class _Verbatim(str):
    """A shell word holding a ``${VAR}`` to expand: never quoted."""


def _shell_join(words: Iterable[str]) -> str:
    return " ".join(w if isinstance(w, _Verbatim) else shlex.quote(w) for w in words)


def parse_nnodes(j: str) -> tuple[int, int, int, str]:
    """Parse ``-j [[MIN_NODES:]NODES x]NPROC_PER_NODE``.

    Returns:
        ``(min_nnodes, max_nnodes, nproc_per_node, nnodes_rep)``, the last torchrun's ``--nnodes``.

    Raises:
        ValueError: ``j`` has another form.
    """
    match = re.fullmatch(r"(?:(?:(\d+):)?(\d+)x)?(\d+)", j)
    if match is None:
        raise ValueError(
            f"invalid -j {j!r}: write MIN:MAXxNPROC, NODESxNPROC or NPROC (1:2x4, 1x4, 4)"
        )
    low, high, nproc = match.groups()
    high = high or "1"
    nnodes_rep = f"{low}:{high}" if low else high
    return int(low or high), int(high), int(nproc), nnodes_rep


def get_role_name(script: str | None, m: str | None) -> str:
    """Name the role after the script's stem or the module's last part.

    Raises:
        ValueError: neither ``script`` nor ``m`` is given.
    """
    if script:
        return Path(script).stem
    if m:
        return m.rpartition(".")[2]
    raise ValueError("cannot name the role: give --script or -m")


def ddp(
    *script_args: str,
    script: str | None = None,
    m: str | None = None,
    image: str = IMAGE,
    name: str = "/",
    h: str | None = None,
    cpu: int = 2,
    gpu: int = 0,
    memMB: int = 1024,  # noqa: N803 (TorchX name)
    j: str = "1x2",
    env: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    max_retries: int = 0,
    rdzv_port: int = 29500,
    rdzv_backend: str = "c10d",
    rdzv_conf: str | None = None,
    mounts: list[str] | None = None,
    debug: bool = False,
    tee: int = 3,
) -> AppDef:
    """Distributed data parallel style application (one role, multi-replica).

    Args:
        script_args: arguments to the main module or script
        script: script or binary to run within the image
        m: the python module path to run
        image: image (e.g. docker)
        name: job name override, ``{experimentname}/{runname}`` (either part may be left out)
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (if specified takes precedence over cpu, gpu, memMB)
        j: [{min_nnodes}:]{nnodes}x{nproc_per_node}; on gpu hosts nproc_per_node <= num gpus
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)
        metadata: metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2,KEY3=v3)
        max_retries: the number of scheduler retries allowed
        rdzv_port: the port on rank0's host for the c10d rendezvous store (multi-node only)
        rdzv_backend: the rendezvous backend to use (multi-node only)
        rdzv_conf: torchrun's ``--rdzv_conf`` (ex. join_timeout=600,close_timeout=600)
        mounts: mounts into the worker (ex. type=<bind/volume>,src=/host,dst=/job[,readonly])
        debug: whether to run with preset debug flags enabled
        tee: tees std stream(s) to console + file: 0 none, 1 stdout, 2 stderr, 3 both

    Raises:
        ValueError: not exactly one of ``script`` and ``m``, or a malformed ``j``.
    """
    if (script is None) == (m is None):
        raise ValueError("exactly one of --script and -m must be specified")
    min_nnodes, max_nnodes, nproc_per_node, nnodes_rep = parse_nnodes(j)
    multi_node = max_nnodes > 1
    # `$$` escapes the macro; some schedulers leave the variable unset on rank 0 itself
    rank0 = _Verbatim(f"$${{{macros.rank0_env}:=localhost}}:{rdzv_port}")
    endpoint = rank0 if multi_node else "localhost:0"

    run_env = dict(env or {})
    names = StructuredNameArgument.parse_from(name=name, m=m, script=script)
    run_env["TORCHX_TRACKING_EXPERIMENT_NAME"] = names.experiment_name
    run_env["TORCHX_TRACKING_RUN_NAME"] = names.run_name
    run_env.setdefault("LOGLEVEL", os.getenv("LOGLEVEL", "WARNING"))
    if debug:
        run_env.update(TORCH_DEBUG_FLAGS)

    options = {
        "--rdzv_backend": rdzv_backend,
        **({"--rdzv_conf": rdzv_conf} if rdzv_conf is not None else {}),
        "--rdzv_endpoint": endpoint,
        "--rdzv_id": macros.app_id,
        "--nnodes": nnodes_rep,
        "--nproc_per_node": str(nproc_per_node),
        "--tee": str(tee),
        "--role": "",
    }
    torchrun = ["-m", "torch.distributed.run", *(word for pair in options.items() for word in pair)]
    if rdzv_backend == "static":
        torchrun += ["--node_rank", macros.replica_id]
    torchrun += [script] if script is not None else ["-m", str(m)]
    torchrun += script_args

    if multi_node:
        entrypoint, args = "bash", ["-c", _shell_join(["python", *torchrun])]
    else:
        entrypoint, args = "python", torchrun
    role = Role(
        name=get_role_name(script, m),
        image=image,
        min_replicas=min_nnodes,
        entrypoint=entrypoint,
        num_replicas=max_nnodes,
        resource=resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
        args=args,
        env=run_env,
        port_map={"c10d": rdzv_port},
        max_retries=max_retries,
        mounts=parse_mounts(mounts) if mounts else [],
    )
    return AppDef(name=names.run_name, roles=[role], metadata=dict(metadata or {}))


def torchrun(
    *script_args: str,
    script: str | None = None,
    m: str | None = None,
    image: str = IMAGE,
    name: str = "/",
    h: str | None = None,
    cpu: int = 2,
    gpu: int = 0,
    memMB: int = 1024,  # noqa: N803 (TorchX name)
    j: str = "1x2",
    env: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    max_retries: int = 0,
    rdzv_port: int = 29500,
    rdzv_backend: str = "c10d",
    rdzv_conf: str | None = None,
    mounts: list[str] | None = None,
    debug: bool = False,
    tee: int = 3,
) -> AppDef:
    """Launch a PyTorch script or module with torchrun: :func:`ddp` under torchx-nightly's name.

    Args:
        script_args: arguments to the main module or script
        script: script or binary to run within the image
        m: the python module path to run
        image: image (e.g. docker)
        name: job name override, ``{experimentname}/{runname}`` (either part may be left out)
        h: a registered named resource (if specified takes precedence over cpu, gpu, memMB)
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        j: [{min_nnodes}:]{nnodes}x{nproc_per_node}; on gpu hosts nproc_per_node <= num gpus
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)
        metadata: metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2,KEY3=v3)
        max_retries: the number of scheduler retries allowed
        rdzv_port: the port on rank0's host for the c10d rendezvous store (multi-node only)
        rdzv_backend: the rendezvous backend to use (multi-node only)
        rdzv_conf: torchrun's ``--rdzv_conf`` (ex. join_timeout=600,close_timeout=600)
        mounts: mounts into the worker (ex. type=<bind/volume>,src=/host,dst=/job[,readonly])
        debug: whether to run with preset debug flags enabled
        tee: tees std stream(s) to console + file: 0 none, 1 stdout, 2 stderr, 3 both

    Raises:
        ValueError: not exactly one of ``script`` and ``m``, or a malformed ``j``.
    """
    arguments = dict(locals())
    del arguments["script_args"]
    return ddp(*script_args, **arguments)


def spmd(
    *args: str,
    script: str | None = None,
    m: str | None = None,
    image: str = IMAGE,
    name: str = "/",
    h: str = "gpu.small",
    j: str = "1x1",
    env: dict[str, str] | None = None,
    metadata: dict[str, str] | None = None,
    max_retries: int = 0,
    mounts: list[str] | None = None,
    debug: bool = False,
) -> AppDef:
    """Single-Process-Multiple-Data application: ``n x m`` copies of one program (via :func:`ddp`).

    Args:
        args: the arguments to the main module or script (e.g. my/trainer.py -foo bar)
        script: the main script (for docker runs, relative to the image's WORKDIR)
        m: the main module name (e.g. my.module.trainer), run as ``python -m``
        image: the base docker image of the workspace, or the job's image without one
        name: ``{experimentname}/{runname}``, ``{experimentname}/``, ``/{runname}``, ``{runname}``
        h: the registered named resource to run on (e.g. aws_p4d.24xlarge)
        j: {nnodes}x{nproc_per_node}; on GPU hosts nproc_per_node defaults to the GPU count
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)
        metadata: metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2,KEY3=v3)
        max_retries: the number of scheduler retries allowed
        mounts: (docker only) mounts into the worker (ex. type=<bind/volume>,src=/host,dst=/job)
        debug: whether to run with preset debug flags enabled

    Raises:
        ValueError: not exactly one of ``script`` and ``m``, or a malformed ``j``.
        UnknownNamedResourceException: ``h`` is not a registered named resource.
    """
    arguments = dict(locals(), j=str(StructuredJArgument.parse_from(h, j)))
    del arguments["args"]
    return ddp(*args, **arguments)
