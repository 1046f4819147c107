"""The ``.torchxconfig`` file: TorchX's INI format and lookup (``torchx.runner.config``).

Sections: ``[<scheduler>]`` run options, ``[component:<name>]`` argument defaults,
``[cli:<command>]`` flag defaults, ``[torchx:tracker]`` and ``[tracker:<name>]``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from asynctorchx import schedulers
from asynctorchx.errors import (
    ConfigError,
    ConfigFileEncodingError,
    ConfigFileNotFoundError,
    UnknownSchedulerException,
)
from asynctorchx.schedulers import SchedulerFactory, get_scheduler_capabilities
from asynctorchx.specs.api import CfgVal, get_type_name, runopt, runopts

if TYPE_CHECKING:
    import configparser

logger = logging.getLogger(__name__)

#: The config file name looked up in ``$HOME`` and the current directory.
CONFIG_FILE = ".torchxconfig"
#: The environment variable that, when set, names the only config file to read.
ENV_TORCHXCONFIG = "TORCHXCONFIG"
#: Between a section's prefix and its name: ``[component:dist.ddp]``.
CONFIG_PREFIX_DELIM = ":"
#: TorchX's constant; :func:`find_configs` reads it only when a program has changed it.
DEFAULT_CONFIG_DIRS: list[str] = [str(Path.home()), str(Path.cwd())]
_IMPORTED_CONFIG_DIRS = tuple(DEFAULT_CONFIG_DIRS)
#: What :func:`dump` writes for an option without a value.
_NONE = "None"


def get_scheduler_factories() -> dict[str, SchedulerFactory]:
    """Return the registered scheduler factories (TorchX's name; patchable here)."""
    return schedulers.get_scheduler_factories()


def find_configs(dirs: Iterable[str] | None = None) -> list[str]:
    """Return the config files to read, highest precedence first.

    Args:
        dirs: directories to look in; default ``$HOME`` then the current directory.

    Returns:
        ``[$TORCHXCONFIG]`` when set, ``[]`` when set but empty, else the files in ``dirs``.

    Raises:
        ConfigFileNotFoundError: ``$TORCHXCONFIG`` names a file that does not exist.
    """
    explicit = os.environ.get(ENV_TORCHXCONFIG)
    if explicit == "":
        return []
    if explicit is not None:
        if not Path(explicit).is_file():
            raise ConfigFileNotFoundError(
                f"{ENV_TORCHXCONFIG}={explicit!r} names no file: create it or unset"
                f" {ENV_TORCHXCONFIG} to use $HOME/{CONFIG_FILE} and ./{CONFIG_FILE}"
                f" ({ENV_TORCHXCONFIG}= reads no file)"
            )
        return [explicit]
    if not dirs and tuple(DEFAULT_CONFIG_DIRS) != _IMPORTED_CONFIG_DIRS:
        dirs = DEFAULT_CONFIG_DIRS
    if not dirs:
        dirs = [str(Path.home()), os.getcwd()]
    paths = dict.fromkeys(str(Path(directory) / CONFIG_FILE) for directory in dirs)
    return [path for path in paths if Path(path).is_file()]


def _parser() -> configparser.ConfigParser:
    """An empty INI parser as TorchX's: no interpolation, keys keep their case."""
    # imported only when a file is there (benchmark 6's ``ours`` rows)
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    return parser


def _read(path: str) -> configparser.ConfigParser:
    """Parse the config file ``path``."""
    import configparser

    parser = _parser()
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f, source=path)
    except UnicodeDecodeError as exc:
        raise ConfigFileEncodingError(path, exc) from exc
    except (OSError, configparser.Error) as exc:
        raise ConfigError(f"cannot read config file {path!r}: {exc}; fix or remove it") from exc
    logger.info("loaded configs from %s", path)
    return parser


#: The merged sections of the config files: ``{section: {key: value}}``.
Sections = Mapping[str, Mapping[str, str]]


def load_sections(
    prefix: str | None = None, dirs: Iterable[str] | None = None
) -> dict[str, dict[str, str]]:
    """Merge the config files' sections (first file wins per key).

    Args:
        prefix: keep only ``[<prefix>:<name>]`` sections, keyed by ``<name>`` (TorchX's);
            ``None``: every section, named in full.
        dirs: directories to look in (see :func:`find_configs`).

    Raises:
        ConfigFileEncodingError: a file is not valid UTF-8.
        ConfigError: a file cannot be parsed, or ``$TORCHXCONFIG`` names no file.
    """
    merged: dict[str, dict[str, str]] = {}
    for path in find_configs(dirs):
        parser = _read(path)
        for section in parser.sections():
            values = merged.setdefault(section, {})
            for key, value in parser.items(section):
                values.setdefault(key, value)
    return merged if prefix is None else _named(merged, prefix)


def _named(sections: Sections, prefix: str) -> dict[str, dict[str, str]]:
    """The ``[<prefix>:<name>]`` sections of ``sections``, keyed by ``<name>``."""
    lead = prefix + CONFIG_PREFIX_DELIM
    return {
        section[len(lead) :]: dict(values)
        for section, values in sections.items()
        if section.startswith(lead) and len(section) > len(lead)
    }


#: Kinds of ``[<prefix>:<name>]`` sections, besides the ``[<scheduler>]`` ones.
_SECTION_PREFIXES = ("component", "cli", "tracker")
#: Sections with a fixed name.
_FIXED_SECTIONS = ("torchx:tracker",)


def warn_unknown(
    sections: Sections,
    schedulers: Collection[str],
    cli_keys: Mapping[str, Collection[str]] | None = None,
) -> None:
    """Log a warning for each section, and ``[cli:<command>]`` key, that nothing reads.

    Args:
        sections: the sections read (:func:`load_sections`).
        schedulers: the registered scheduler names.
        cli_keys: ``{"cli:<command>": keys it reads}``; other sections' keys are not checked.
    """
    for section, values in sections.items():
        prefix = section.split(CONFIG_PREFIX_DELIM, 1)[0]
        known_kind = section in schedulers or section in _FIXED_SECTIONS
        if not known_kind and not (CONFIG_PREFIX_DELIM in section and prefix in _SECTION_PREFIXES):
            logger.warning(
                "section [%s] of the .torchxconfig is ignored: it is neither a scheduler"
                " (%s) nor a [component:<name>], [cli:<command>], [tracker:<name>] or"
                " [torchx:tracker] section",
                section,
                ", ".join(schedulers),
            )
            continue
        known = (cli_keys or {}).get(section)
        if known is None:
            continue
        for key in sorted(set(values) - set(known)):
            logger.warning(
                "`%s` in section [%s] of the .torchxconfig is ignored: the keys read there are %s",
                key,
                section,
                ", ".join(known),
            )


def _sections(dirs: Iterable[str] | None, sections: Sections | None) -> Sections:
    return load_sections(dirs=dirs) if sections is None else sections


def get_configs(
    prefix: str, name: str, dirs: Iterable[str] | None = None, *, sections: Sections | None = None
) -> dict[str, str]:
    """Return the keys of section ``[<prefix>:<name>]`` (empty if absent).

    Args:
        prefix: the section's kind (``component``, ``cli``, ``tracker``).
        name: the section's name after the ``:``.
        dirs: directories to look in (see :func:`find_configs`).
        sections: the sections already read; ``None``: read the files.

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
    return _named(_sections(dirs, sections), "component")


def scheduler_run_opts(scheduler: str) -> runopts:
    """Return the run options of the registered scheduler ``scheduler`` (str).

    Raises:
        UnknownSchedulerException: ``scheduler`` is not registered.
    """
    factories = get_scheduler_factories()
    factory = factories.get(scheduler)
    if factory is None:
        raise UnknownSchedulerException(scheduler, list(factories))
    caps = get_scheduler_capabilities(factory)
    make = caps.run_opts if caps is not None else None
    return make() if make is not None else factory("_").run_opts()


def load(scheduler: str, f: TextIO, cfg: dict[str, CfgVal], opts: runopts | None = None) -> None:
    """Fill ``cfg`` from section ``[<scheduler>]`` of the open INI file ``f``.

    As ``torchx.runner.config.load``: keys in ``cfg`` win; unknown keys are skipped.

    Args:
        scheduler: the scheduler's registered name (the section's name).
        f: the open INI file.
        cfg: the run options given so far; filled in place.
        opts: the scheduler's run options; ``None``: looked up by name.

    Raises:
        ConfigError: the file is not valid INI or a value cannot be cast.
        UnknownSchedulerException: ``opts`` is ``None`` and no scheduler has that name.
    """
    import configparser

    parser = _parser()
    try:
        parser.read_file(f)
    except configparser.Error as exc:
        raise ConfigError(f"invalid config file: {exc}") from exc
    if not parser.has_section(scheduler):
        return
    _fill(cfg, dict(parser.items(scheduler)), opts or scheduler_run_opts(scheduler), scheduler)


def _fill(cfg: dict[str, CfgVal], raw: Mapping[str, str], opts: runopts, scheduler: str) -> None:
    for key, value in raw.items():
        if key in cfg:
            continue
        if opts.get(key) is None:
            logger.warning(
                "`%s = %s` in section [%s] of the .torchxconfig is not a run option of the"
                " %s scheduler: ignored (remove it to silence this warning)",
                key,
                value,
                scheduler,
                scheduler,
            )
            continue
        if value.strip() == _NONE:
            cfg[key] = None
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
    dirs: Iterable[str] | runopts | None = None,
    opts: runopts | None = None,
    *,
    sections: Sections | None = None,
) -> None:
    """Fill ``cfg`` (in place) from the ``[<scheduler>]`` sections of the config files.

    As ``torchx.runner.config.apply``: values in ``cfg`` win, then the first file found.

    Args:
        scheduler: the scheduler's registered name (the section's name).
        cfg: the run options given so far; filled in place.
        dirs: directories to look in (see :func:`find_configs`); a :class:`runopts` is ``opts``.
        opts: the scheduler's run options; ``None``: looked up by name.
        sections: the sections already read; ``None``: read the files.

    Raises:
        ConfigError: a file is unreadable or a value cannot be cast to the option's type.
        UnknownSchedulerException: ``opts`` is not given and no scheduler has that name.
    """
    if isinstance(dirs, runopts):
        opts, dirs = dirs, None
    raw = _sections(dirs, sections).get(scheduler, {})
    if raw:
        _fill(cfg, raw, opts or scheduler_run_opts(scheduler), scheduler)


def _fixme(opt: runopt, max_len: int = 60) -> str:
    """``#FIXME:(str) <help>`` on one line, cut to ``max_len`` characters."""
    text = " ".join(f"#FIXME:({get_type_name(opt.opt_type)}) {opt.help}".split())
    return text if len(text) <= max_len else f"{text[:max_len]}..."


def _dump_value(opt: runopt) -> str:
    default = opt.default
    if isinstance(default, list):
        return ";".join(default) if default else _NONE
    if isinstance(default, dict):
        return ";".join(f"{k}:{v}" for k, v in default.items()) if default else _NONE
    return str(default)


def dump(
    f: TextIO,
    schedulers: Iterable[str] | Mapping[str, runopts] | None = None,
    required_only: bool = False,
) -> None:
    """Write a ``.torchxconfig`` template, one section per scheduler.

    TorchX's format (``torchx.runner.config.dump``); a backend that does not import is left out.

    Args:
        f: where to write.
        schedulers: names (``None``: every registered one), or ``{name: runopts}``.
        required_only: write only the required options.

    Raises:
        UnknownSchedulerException: a name is not registered.
    """
    if isinstance(schedulers, Mapping):
        by_name: Mapping[str, runopts] = schedulers
    else:
        read: dict[str, runopts] = {}
        for name in list(schedulers or get_scheduler_factories()):
            try:
                read[name] = scheduler_run_opts(name)
            except ImportError:
                logger.info("skipping scheduler %s: its module does not import", name)
        by_name = read
    parser = _parser()
    for name, opts in by_name.items():
        parser.add_section(name)
        for key, opt in opts:
            if opt.is_required:
                parser.set(name, key, _fixme(opt))
            elif not required_only:
                parser.set(name, key, _dump_value(opt))
    parser.write(f, space_around_delimiters=True)
