"""Find components by name: builtins, entry points, and functions in files.

A component name is one of (as ``torchx.specs.finder`` in TorchX 0.7.0):

* a builtin, ``<module>.<function>`` relative to :mod:`asynctorchx.components`
  (``utils.echo``, ``dist.ddp``);
* a component registered under the entry point group ``asynctorchx.components``: each
  entry maps a prefix to a module, whose functions (and its submodules') are named
  ``<prefix>.<relative module>.<function>``; a prefix starting with ``_`` adds nothing::

      [project.entry-points."asynctorchx.components"]
      foo = "my_pkg.components"        # my_pkg/components/train.py:run -> foo.train.run

* ``path/to/file.py:function``: the function in that file (relative to the current
  directory), checked by :mod:`asynctorchx.specs.file_linter` before it is imported.

Unlike TorchX, registered components are merged over the builtins (a registered name
wins) instead of hiding them all. A module's component candidates are its public
functions defined in that module; those that break a linter rule are left out of
:func:`get_components`, and :func:`get_component` names the broken rules.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import pkgutil
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from types import ModuleType

import attrs

from asynctorchx.errors import ComponentNotFoundException, ComponentValidationException
from asynctorchx.specs import file_linter
from asynctorchx.specs.api import AppDef
from asynctorchx.specs.builders import get_fn_docstring

#: The entry point group searched for user-registered component modules.
ENTRY_POINT_GROUP: str = "asynctorchx.components"
#: The package that holds the builtin components.
BUILTINS_PACKAGE: str = "asynctorchx.components"


@attrs.define
class ComponentDef:
    """A component found by name.

    Args:
        name: its name (``utils.echo``, ``path/to/file.py:fn``).
        fn: the function that returns the :class:`AppDef`.
        description: the first part of the function's docstring.
        module: the name of the module that defines it.
        path: the source file that defines it (``None`` if unknown).
        validation_errors: the linter errors; a component with any is not runnable.
    """

    name: str
    fn: Callable[..., AppDef]
    description: str
    module: str
    path: str | None = None
    validation_errors: list[str] = attrs.field(factory=list)


def _iter_modules(base: ModuleType) -> list[ModuleType]:
    """``base`` and all its submodules, recursively (regular packages only)."""
    modules = [base]
    if hasattr(base, "__path__"):
        for info in pkgutil.walk_packages(base.__path__, prefix=f"{base.__name__}."):
            modules.append(importlib.import_module(info.name))
    return modules


def _relname(module: ModuleType, base: ModuleType) -> str:
    if module.__name__ == base.__name__:
        return ""
    return module.__name__[len(base.__name__) + 1 :]


def _lint(path: str | None, fn_name: str) -> list[str]:
    if path is None:
        return ["the source file of the function is unknown, so it cannot be checked"]
    return [
        message.description for message in file_linter.errors(file_linter.validate(path, fn_name))
    ]


def _components_of(base: ModuleType, prefix: str) -> dict[str, ComponentDef]:
    found: dict[str, ComponentDef] = {}
    for module in _iter_modules(base):
        path = getattr(module, "__file__", None)
        rel = _relname(module, base)
        for fn_name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn_name.startswith("_") or fn.__module__ != module.__name__:
                continue
            name = ".".join(part for part in (prefix, rel, fn_name) if part)
            found[name] = ComponentDef(
                name=name,
                fn=fn,
                description=get_fn_docstring(fn)[0],
                module=module.__name__,
                path=str(Path(path).resolve()) if path else None,
                validation_errors=_lint(path, fn_name),
            )
    return found


@functools.lru_cache(maxsize=1)
def _all_components() -> dict[str, ComponentDef]:
    components = _components_of(importlib.import_module(BUILTINS_PACKAGE), "")
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        loaded = entry_point.load()
        module = (
            loaded if isinstance(loaded, ModuleType) else importlib.import_module(entry_point.value)
        )
        prefix = "" if entry_point.name.startswith("_") else entry_point.name
        components.update(_components_of(module, prefix))
    return components


def reload() -> None:
    """Forget the cached builtins and entry points; the next lookup scans them again."""
    _all_components.cache_clear()


def get_components() -> dict[str, ComponentDef]:
    """Return every valid builtin and registered component, keyed by name.

    Components with linter errors are left out (TorchX's behaviour); ask for one with
    :func:`get_component` to see why.
    """
    return {name: c for name, c in _all_components().items() if not c.validation_errors}


def _load_file_component(name: str) -> ComponentDef:
    file_part, _, fn_name = name.rpartition(":")
    path = Path(file_part).expanduser()
    if not fn_name or not file_part:
        raise ComponentNotFoundException(
            f"{name!r} is not a component name: use a builtin (`utils.echo`) or"
            " `path/to/file.py:function`"
        )
    if not path.is_file():
        raise ComponentNotFoundException(
            f"component file {str(path)!r} (from {name!r}) does not exist: give a path"
            f" relative to {Path.cwd()} or an absolute one"
        )
    errors = _lint(str(path), fn_name)
    if any("not found at the top level" in error for error in errors):
        raise ComponentNotFoundException(
            f"function {fn_name!r} is not defined at the top level of {str(path)!r}"
        )
    if errors:
        raise ComponentValidationException(f"component {name!r} is not valid: " + "; ".join(errors))
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    module_name = f"asynctorchx_component_{resolved.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise ComponentNotFoundException(f"cannot import {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # so dataclasses/attrs/pickle in it can find it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    fn = getattr(module, fn_name)
    return ComponentDef(
        name=name,
        fn=fn,
        description=get_fn_docstring(fn)[0],
        module=module_name,
        path=str(resolved),
    )


def get_component(name: str) -> ComponentDef:
    """Return the component called ``name`` (see the module docstring for the forms).

    Args:
        name: ``utils.echo``, a registered name, or ``path/to/file.py:function``.

    Raises:
        ComponentNotFoundException: no such builtin or registered component (the message
            suggests close names), or the file or function does not exist.
        ComponentValidationException: the function breaks a component rule (the message
            lists them).
    """
    if ":" in name:
        return _load_file_component(name)
    components = _all_components()
    component = components.get(name)
    if component is None:
        import difflib

        close = difflib.get_close_matches(name, components.keys(), n=3)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise ComponentNotFoundException(
            f"no component {name!r}: {hint}`asynctorchx builtins` lists the components;"
            " a function in a file is named `path/to/file.py:function`"
        )
    if component.validation_errors:
        raise ComponentValidationException(
            f"component {name!r} is not valid: " + "; ".join(component.validation_errors)
        )
    return component
