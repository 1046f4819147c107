"""Distributed components: ``dist.ddp``, ``dist.torchrun``, ``dist.spmd`` (torchrun).

On several nodes the rendezvous endpoint is rank 0's host, in the environment variable
:data:`~asynctorchx.specs.macros.rank0_env` names; only a shell reads it into an
argument, so such a replica runs ``bash -c``. One node needs no shell.
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
#: TorchX's name for :data:`TORCH_DEBUG_FLAGS` (``torchx.components.dist._TORCH_DEBUG_FLAGS``,
#: which TorchX's documentation shows); the same dict.
_TORCH_DEBUG_FLAGS: dict[str, str] = TORCH_DEBUG_FLAGS


class _Verbatim(str):
    """A shell word that must not be quoted (it holds a ``${VAR}`` to expand)."""


def _shell_join(words: Iterable[str]) -> str:
    return " ".join(w if isinstance(w, _Verbatim) else shlex.quote(w) for w in words)


def parse_nnodes(j: str) -> tuple[int, int, int, str]:
    """Parse ``-j [[MIN_NODES:]NODES x]NPROC_PER_NODE``.

    Returns:
        ``(min_nnodes, max_nnodes, nproc_per_node, nnodes_rep)``, ``nnodes_rep`` being
        torchrun's ``--nnodes`` (``"2"``, ``"1:2"``).

    Raises:
        ValueError: ``j`` has another form.
    """
    match = re.fullmatch(r"(?:(?:(\d+):)?(\d+)x)?(\d+)", j)
    if match is None:
        raise ValueError(
            f"invalid -j {j!r}: write MIN:MAXxNPROC, NODESxNPROC or NPROC (1:2x4, 1x4, 4)"
        )
    low, high, nproc = match.groups()
    high = high or "1"  # -j NPROC: one node
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

    Uses torch.distributed.run (torchrun) to launch and coordinate the PyTorch worker
    processes, with the ``c10d`` rendezvous backend on ``$rank0_host:$rdzv_port``. On a
    single node ``rdzv_port`` is ignored and port 0 (a free port) is used.
    ``h`` (a named resource) wins over ``cpu``, ``gpu`` and ``memMB``.

    Args:
        script_args: arguments to the main module or script
        script: script or binary to run within the image
        m: the python module path to run
        image: image (e.g. docker)
        name: job name override in the following format: ``{experimentname}/{runname}`` or
            ``{experimentname}/`` or ``/{runname}`` or ``{runname}``.
            Uses the script or module name if ``{runname}`` not specified.
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (if specified takes precedence over cpu, gpu, memMB)
        j: [{min_nnodes}:]{nnodes}x{nproc_per_node}, for gpu hosts, nproc_per_node must not
            exceed num gpus
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)
        metadata: metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2,KEY3=v3)
        max_retries: the number of scheduler retries allowed
        rdzv_port: the port on rank0's host to use for hosting the c10d store used for
            rendezvous. Only takes effect when running multi-node.
        rdzv_backend: the rendezvous backend to use. Only takes effect when running multi-node.
        rdzv_conf: more rendezvous configuration, torchrun's ``--rdzv_conf``
            (ex. join_timeout=600,close_timeout=600,timeout=600); none by default.
        mounts: mounts to mount into the worker environment/container
            (ex. type=<bind/volume>,src=/host,dst=/job[,readonly]).
        debug: whether to run with preset debug flags enabled
        tee: tees the specified std stream(s) to console + file. 0: none, 1: stdout,
            2: stderr, 3: both

    Raises:
        ValueError: not exactly one of ``script`` and ``m``, or a malformed ``j``.
    """
    if (script is None) == (m is None):
        raise ValueError("exactly one of --script and -m must be specified")
    min_nnodes, max_nnodes, nproc_per_node, nnodes_rep = parse_nnodes(j)
    multi_node = max_nnodes > 1
    # `$$` escapes the macro syntax: after substitution this reads
    # ${TORCHX_RANK0_HOST:=localhost}:29500, expanded by bash on each replica
    # (some schedulers leave the variable unset on rank 0 itself: localhost then).
    rank0 = _Verbatim(f"$${{{macros.rank0_env}:=localhost}}:{rdzv_port}")
    endpoint = rank0 if multi_node else "localhost:0"

    run_env = dict(env or {})
    names = StructuredNameArgument.parse_from(name=name, m=m, script=script)
    run_env["TORCHX_TRACKING_EXPERIMENT_NAME"] = names.experiment_name
    run_env["TORCHX_TRACKING_RUN_NAME"] = names.run_name  # torchx-nightly sets it too
    run_env.setdefault("LOGLEVEL", os.getenv("LOGLEVEL", "WARNING"))
    if debug:
        run_env.update(TORCH_DEBUG_FLAGS)

    options = {  # torchrun's flags and their values, in this order on its command line
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
    """Launch a PyTorch script or module on ``nnodes x nproc_per_node`` workers with torchrun.

    :func:`ddp` under the name of the launcher it starts: this calls ``ddp`` with the
    same arguments, so both give the same AppDef. ``ddp`` is TorchX 0.7.0's name
    (``torchx.components.dist.ddp``) and holds the implementation; torchx-nightly has
    both names. The
    signature and ``Args`` are repeated here because a component is read from its
    source (:mod:`asynctorchx.specs.file_linter`); a test keeps them equal to ``ddp``'s.

    Args:
        script_args: arguments to the main module or script
        script: script or binary to run within the image
        m: the python module path to run
        image: image (e.g. docker)
        name: job name override: ``{experimentname}/{runname}``, ``{experimentname}/``,
            ``/{runname}`` or ``{runname}``; the script or module name by default
        h: a registered named resource (if specified takes precedence over cpu, gpu, memMB)
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        j: [{min_nnodes}:]{nnodes}x{nproc_per_node}, for gpu hosts, nproc_per_node must not
            exceed num gpus
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)
        metadata: metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2,KEY3=v3)
        max_retries: the number of scheduler retries allowed
        rdzv_port: the port on rank0's host for the c10d rendezvous store (multi-node only)
        rdzv_backend: the rendezvous backend to use (multi-node only)
        rdzv_conf: more rendezvous configuration, torchrun's ``--rdzv_conf``
            (ex. join_timeout=600,close_timeout=600,timeout=600); none by default.
        mounts: mounts to mount into the worker environment/container
            (ex. type=<bind/volume>,src=/host,dst=/job[,readonly]).
        debug: whether to run with preset debug flags enabled
        tee: tees the specified std stream(s) to console + file. 0: none, 1: stdout,
            2: stderr, 3: both

    Raises:
        ValueError: not exactly one of ``script`` and ``m``, or a malformed ``j``.
    """
    arguments = dict(locals())  # ddp's keyword arguments, by the same names
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
    """Single-Process-Multiple-Data application: ``n x m`` copies of one program.

    ``-j NxM`` runs ``M`` processes on each of ``N`` nodes of type ``h``; ``-j N`` runs
    one process per GPU of ``h``. Use it for any distributed PyTorch script (DDP, FSDP,
    RPC); ``-j 1x1`` is plain ``python`` except that the script may call
    ``torch.distributed.init_process_group``. Runs :func:`ddp` underneath.

    Args:
        args: the arguments to the main module or script (e.g. my/trainer.py -foo bar)
        script: the main script (for docker runs, relative to the image's WORKDIR)
        m: the main module name (e.g. my.module.trainer), run as ``python -m``
        image: the base docker image of the workspace, or the job's image without one
        name: ``{experimentname}/{runname}`` or ``{experimentname}/`` or ``/{runname}``
            or ``{runname}``
        h: the type of host to run on (e.g. aws_p4d.24xlarge). Must be one of the
            registered named resources
        j: {nnodes}x{nproc_per_node}. For GPU hosts omitting nproc_per_node will infer it
            from the GPU count on the host
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)
        metadata: metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2,KEY3=v3)
        max_retries: the number of scheduler retries allowed
        mounts: (for docker based runs only) mounts to mount into the worker
            environment/container (ex. type=<bind/volume>,src=/host,dst=/job[,readonly]).
        debug: whether to run with preset debug flags enabled

    Raises:
        ValueError: not exactly one of ``script`` and ``m``, or a malformed ``j``.
        UnknownNamedResourceException: ``h`` is not a registered named resource.
    """
    return ddp(
        *args,
        script=script,
        m=m,
        image=image,
        name=name,
        h=h,
        j=str(StructuredJArgument.parse_from(h, j)),
        env=dict(env or {}),
        metadata=metadata,
        max_retries=max_retries,
        mounts=mounts,
        debug=debug,
    )
