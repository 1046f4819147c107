"""Utility components (``torchx.components.utils``): ``echo``, ``sh``, ``python``, ``copy``, ..."""

from __future__ import annotations

import os
import shlex

from asynctorchx.components import IMAGE
from asynctorchx.specs import resource
from asynctorchx.specs.api import NONE, AppDef, Resource, Role, parse_mounts


def _small_app(
    name: str,
    image: str,
    entrypoint: str,
    args: list[str],
    replicas: int = 1,
    mounts: list[str] | None = None,
) -> AppDef:
    """An app of one role named ``name``, each replica on 1 CPU and 1024 MB (TorchX's figures)."""
    role = Role(
        name=name,
        image=image,
        entrypoint=entrypoint,
        args=args,
        num_replicas=replicas,
        resource=Resource(cpu=1, gpu=0, memMB=1024),
        mounts=parse_mounts(mounts) if mounts else [],
    )
    return AppDef(name=name, roles=[role])


def echo(msg: str = "hello world", image: str = IMAGE, num_replicas: int = 1) -> AppDef:
    """Echos a message to stdout (calls echo)

    Args:
        msg: message to echo
        image: image to use
        num_replicas: number of replicas to run
    """
    return _small_app("echo", image, "echo", [msg], num_replicas)


def touch(file: str, image: str = IMAGE) -> AppDef:
    """Touches a file (calls touch)

    Args:
        file: file to create
        image: the image to use
    """
    return _small_app("touch", image, "touch", [file])


def sh(
    *args: str,
    image: str = IMAGE,
    num_replicas: int = 1,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,  # noqa: N803 (TorchX name)
    h: str | None = None,
    env: dict[str, str] | None = None,
    max_retries: int = 0,
    mounts: list[str] | None = None,
) -> AppDef:
    """Runs the provided command via sh (``sh -c '<args, each shell-quoted, joined>'``).

    Args:
        args: the command and its arguments
        image: image to use
        num_replicas: number of replicas to run
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (if specified takes precedence over cpu, gpu, memMB)
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2,ENV3=v3)
        max_retries: the number of scheduler retries allowed
        mounts: mounts into the worker (ex. type=<bind/volume>,src=/host,dst=/job[,readonly])
    """
    env = dict(env or {})
    env.setdefault("LOGLEVEL", os.getenv("LOGLEVEL", "WARNING"))
    role = Role(
        name="sh",
        image=image,
        entrypoint="sh",
        args=["-c", " ".join(shlex.quote(arg) for arg in args)],
        num_replicas=num_replicas,
        resource=resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
        env=env,
        max_retries=max_retries,
        mounts=parse_mounts(mounts) if mounts else [],
    )
    return AppDef(name="sh", roles=[role])


def python(
    *args: str,
    m: str | None = None,
    c: str | None = None,
    script: str | None = None,
    image: str = IMAGE,
    name: str = "torchx_utils_python",
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,  # noqa: N803 (TorchX name)
    h: str | None = None,
    num_replicas: int = 1,
    mounts: list[str] | None = None,
) -> AppDef:
    """Runs ``python`` with the given module, command or script (``--`` ends the component's args).

    Args:
        args: arguments passed to the program in sys.argv[1:] (ignored with `--c`)
        m: run library module as a script
        c: program passed as string (may error if scheduler has a length limit on args)
        script: .py script to run
        image: image to run on
        name: name of the job
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (if specified takes precedence over cpu, gpu, memMB)
        num_replicas: number of copies to run (each on its own container)
        mounts: mounts into the worker (ex. type=<bind/volume>,src=/host,dst=/job[,readonly])

    Raises:
        ValueError: not exactly one of ``m``, ``c`` and ``script``, or a malformed mount.
    """
    given = [(flag, value) for flag, value in (("-m", m), ("-c", c), ("--script", script)) if value]
    if len(given) != 1:
        raise ValueError(
            "exactly one of `-m`, `-c` and `--script` needs to be specified"
            f" (got {', '.join(flag for flag, _ in given) or 'none'})"
        )
    flag, value = given[0]
    cmd = [value] if flag == "--script" else [flag, value]
    role = Role(
        name="python",
        image=image,
        entrypoint="python",
        num_replicas=num_replicas,
        resource=resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
        args=[*cmd, *args],
        env={"HYDRA_MAIN_MODULE": m} if m else {},
        mounts=parse_mounts(mounts) if mounts else [],
    )
    return AppDef(name=name, roles=[role])


def binary(
    *args: str,
    entrypoint: str,
    name: str = "torchx_utils_binary",
    num_replicas: int = 1,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,  # noqa: N803 (TorchX name)
    h: str | None = None,
) -> AppDef:
    """Runs a binary (``entrypoint``) with the given arguments; the image is ``<NONE>``.

    Args:
        args: arguments passed to the program in sys.argv[1:]
        entrypoint: the binary to run
        name: name of the job
        num_replicas: number of copies to run (each on its own container)
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (if specified takes precedence over cpu, gpu, memMB)
    """
    role = Role(
        name="binary",
        image=NONE,
        entrypoint=entrypoint,
        num_replicas=num_replicas,
        args=[*args],
        resource=resource(cpu=cpu, gpu=gpu, memMB=memMB, h=h),
    )
    return AppDef(name=name, roles=[role])


# fsspec when installed (URLs work, as in TorchX); no `$` in it: args are macro-substituted
_COPY_PROGRAM = """\
import shutil, sys
src, dst = sys.argv[1], sys.argv[2]
try:
    import fsspec
except ImportError:
    shutil.copyfile(src, dst)
else:
    with fsspec.open(src, "rb") as fin, fsspec.open(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout)
print(f"copied {src} -> {dst}")
"""

# writes what TorchX's FsspecResultTracker(tracker_base)[trial_idx] reads back
_BOOTH_PROGRAM = """\
import json, os, sys
x1, x2, trial, base = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
value = (x1 + 2 * x2 - 7) ** 2 + (2 * x1 + x2 - 5) ** 2
result = json.dumps({"booth_eval": value}, indent=2).encode("utf-8")
try:
    import fsspec
except ImportError:
    os.makedirs(base, exist_ok=True)
    with open(os.path.join(base, trial), "wb") as out:
        out.write(result)
else:
    fsspec.get_mapper(base, create=True)[trial] = result
print(f"booth({x1}, {x2}) = {value} -> {base.rstrip('/')}/{trial}")
"""


def copy(src: str, dst: str, image: str = IMAGE, mounts: list[str] | None = None) -> AppDef:
    """Copies the file ``src`` to ``dst``: local paths, or fsspec URLs where fsspec is installed.

    Args:
        src: the source file location
        dst: the destination file location
        image: the image that contains the copy app
        mounts: mounts into the worker (ex. type=<bind/volume>,src=/host,dst=/job[,readonly])

    Raises:
        ValueError: a malformed mount.
    """
    args = ["-c", _COPY_PROGRAM, src, dst]
    return _small_app("torchx-utils-copy", image, "python", args, mounts=mounts)


def booth(
    x1: float,
    x2: float,
    trial_idx: int = 0,
    tracker_base: str = "/tmp/torchx-util-booth",
    image: str = IMAGE,
) -> AppDef:
    """Evaluates the booth function into ``{tracker_base}/{trial_idx}`` (TorchX's tracker reads it).

    Args:
        x1: x1
        x2: x2
        trial_idx: ignore if not running hpo
        tracker_base: URI of the tracker's base output directory (e.g. s3://foo/bar)
        image: the image that contains the booth app
    """
    args = ["-c", _BOOTH_PROGRAM, str(x1), str(x2), str(trial_idx), tracker_base]
    return _small_app("torchx-utils-booth", image, "python", args)
