"""The ``.torchxconfig`` file: TorchX's INI format and lookup, read with :mod:`configparser`.

Where the files are (TorchX's rule, ``torchx.runner.config``):

* ``$TORCHXCONFIG`` alone when that variable is set; a missing file (or an empty value)
  is an error (:class:`~asynctorchx.errors.ConfigError`), as in TorchX.
* otherwise ``$HOME/.torchxconfig`` then ``./.torchxconfig`` (the current directory);
  files that do not exist are skipped. The first file that sets a value wins.

Sections:

* ``[<scheduler>]`` (``[local_cwd]``): run options of that scheduler, typed by its
  ``runopts`` (``log_dir = /tmp/logs``). Values given on the command line (``-cfg``) or in
  code beat the files: :func:`apply` only fills in keys that are missing.
* ``[component:<name>]`` (``[component:dist.ddp]``): default values of the component's
  arguments (``j = 1x2``).
* ``[cli:<command>]`` (``[cli:run]``): defaults of a CLI command's flags
  (``component = utils.echo``, ``scheduler = local_cwd``).
* ``[torchx:tracker]``: tracker names as keys; ``[tracker:<name>]``: ``config = <uri>``.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TextIO

from asynctorchx.errors import ConfigError
from asynctorchx.specs.api import CfgVal, runopts

#: The config file name looked up in ``$HOME`` and the current directory.
CONFIG_FILE = ".torchxconfig"
#: The environment variable that, when set, names the only config file to read.
ENV_TORCHXCONFIG = "TORCHXCONFIG"


def find_configs(dirs: Iterable[str] | None = None) -> list[str]:
    """Return the config files to read, highest precedence first.

    Args:
        dirs: directories to look in for ``.torchxconfig`` (default: ``$HOME`` then the
            current directory). Ignored when ``$TORCHXCONFIG`` is set.

    Raises:
        ConfigError: ``$TORCHXCONFIG`` names a file that does not exist.
    """
    explicit = os.environ.get(ENV_TORCHXCONFIG)
    if explicit is not None:  # set, even to "" (TorchX's rule): the only file to read
        if not explicit or not Path(explicit).is_file():
            raise ConfigError(
                f"{ENV_TORCHXCONFIG}={explicit!r} names no file: create it or unset"
                f" {ENV_TORCHXCONFIG} to use $HOME/{CONFIG_FILE} and ./{CONFIG_FILE}"
            )
        return [explicit]
    if dirs is None:
        dirs = [str(Path.home()), os.getcwd()]
    found: list[str] = []
    for directory in dirs:
        path = Path(directory) / CONFIG_FILE
        if path.is_file() and str(path) not in found:
            found.append(str(path))
    return found


def _read(path: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep key case
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f, source=path)
    except (OSError, configparser.Error) as exc:
        raise ConfigError(f"cannot read config file {path!r}: {exc}; fix or remove it") from exc
    return parser


#: The merged sections of the config files: ``{section: {key: value}}``.
Sections = Mapping[str, Mapping[str, str]]


def load_sections(dirs: Iterable[str] | None = None) -> dict[str, dict[str, str]]:
    """Merge every config file into ``{section: {key: value}}`` (first file wins per key).

    This is the one place the files are read: a command reads them once and passes the
    result (``sections=``) to the functions below and to
    :func:`~asynctorchx.runner.get_runner`.

    Args:
        dirs: directories to look in (see :func:`find_configs`).

    Raises:
        ConfigError: a file cannot be parsed, or ``$TORCHXCONFIG`` names no file.
    """
    merged: dict[str, dict[str, str]] = {}
    for path in find_configs(dirs):
        parser = _read(path)
        for section in parser.sections():
            values = merged.setdefault(section, {})
            for key, value in parser.items(section):
                values.setdefault(key, value)
    return merged


def _sections(dirs: Iterable[str] | None, sections: Sections | None) -> Sections:
    return load_sections(dirs) if sections is None else sections


def get_configs(
    prefix: str, name: str, dirs: Iterable[str] | None = None, *, sections: Sections | None = None
) -> dict[str, str]:
    """Return the keys of section ``[<prefix>:<name>]`` (empty if absent).

    ``get_configs("component", "dist.ddp")`` reads ``[component:dist.ddp]``.

    Args:
        prefix: the section's kind (``component``, ``cli``, ``tracker``).
        name: the section's name after the ``:``.
        dirs: directories to look in (see :func:`find_configs`).
        sections: the sections already read (:func:`load_sections`); the files are
            read only when it is ``None``.

    Raises:
        ConfigError: as :func:`load_sections`.
    """
    return dict(_sections(dirs, sections).get(f"{prefix}:{name}", {}))


def get_config(
    prefix: str,
    name: str,
    key: str,
    dirs: Iterable[str] | None = None,
    *,
    sections: Sections | None = None,
) -> str | None:
    """Return one value of section ``[<prefix>:<name>]``, or ``None``.

    Args:
        prefix: as :func:`get_configs`.
        name: as :func:`get_configs`.
        key: the key in that section.
        dirs: as :func:`get_configs`.
        sections: as :func:`get_configs`.

    Raises:
        ConfigError: as :func:`load_sections`.
    """
    return get_configs(prefix, name, dirs, sections=sections).get(key)


def get_component_defaults(
    dirs: Iterable[str] | None = None, *, sections: Sections | None = None
) -> dict[str, dict[str, str]]:
    """Return ``{component name: {argument: default}}`` from every ``[component:<name>]``.

    Args:
        dirs: as :func:`get_configs`.
        sections: as :func:`get_configs`.

    Raises:
        ConfigError: as :func:`load_sections`.
    """
    return {
        section.removeprefix("component:"): dict(values)
        for section, values in _sections(dirs, sections).items()
        if section.startswith("component:")
    }


def load(scheduler: str, f: TextIO, cfg: dict[str, CfgVal], opts: runopts) -> None:
    """Fill ``cfg`` from section ``[<scheduler>]`` of the open INI file ``f``.

    Keys already in ``cfg`` are kept (the caller's value wins). Each value is cast to the
    type its ``runopts`` entry declares; unknown keys are skipped (TorchX does the same, so
    a config file can serve several versions).

    Raises:
        ConfigError: the file is not valid INI or a value cannot be cast.
    """
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_file(f)
    except configparser.Error as exc:
        raise ConfigError(f"invalid config file: {exc}") from exc
    if not parser.has_section(scheduler):
        return
    _fill(cfg, dict(parser.items(scheduler)), opts, scheduler)


def _fill(cfg: dict[str, CfgVal], raw: Mapping[str, str], opts: runopts, scheduler: str) -> None:
    for key, value in raw.items():
        if key in cfg or opts.get(key) is None:
            continue
        try:
            cfg.update(opts.cfg_from_str(f"{key}={value}"))
        except ValueError as exc:
            raise ConfigError(
                f"bad value {value!r} for {key!r} in section [{scheduler}] of the"
                f" .torchxconfig: {exc}"
            ) from exc


def apply(
    scheduler: str,
    cfg: dict[str, CfgVal],
    opts: runopts,
    dirs: Iterable[str] | None = None,
    *,
    sections: Sections | None = None,
) -> None:
    """Fill ``cfg`` (in place) from the ``[<scheduler>]`` sections of the config files.

    Values already in ``cfg`` (``-cfg`` on the command line) win over the files, and the
    first file found (see :func:`find_configs`) wins over later ones.

    Args:
        scheduler: the scheduler's registered name (the section's name).
        cfg: the run options given so far; filled in place.
        opts: the scheduler's run options, which type the values.
        dirs: as :func:`get_configs`.
        sections: as :func:`get_configs`.

    Raises:
        ConfigError: a file is unreadable or a value cannot be cast to the option's type.
    """
    _fill(cfg, _sections(dirs, sections).get(scheduler, {}), opts, scheduler)


def dump(f: TextIO, schedulers: Mapping[str, runopts], required_only: bool = False) -> None:
    """Write a ``.torchxconfig`` with one section per scheduler, listing its options.

    Options with a default are written with it; the others are written commented out
    (``; key =``) with their help text, so the file is a template to edit.
    """
    for name, opts in schedulers.items():
        f.write(f"[{name}]\n")
        for key, opt in opts:
            if required_only and not opt.is_required:
                continue
            for line in opt.help.splitlines() or [""]:  # a multi-line help stays a comment
                f.write(f"; {line}\n")
            if opt.default is None:
                f.write(f"; {key} =\n")
            elif isinstance(opt.default, list):
                f.write(f"{key} = {','.join(str(v) for v in opt.default)}\n")
            else:
                f.write(f"{key} = {opt.default}\n")
        f.write("\n")
