"""Find components by name: a builtin, ``<prefix>.<module>.<fn>``, or ``file.py:fn`` (TorchX's).

``file.py:Cls``, ``pkg.module:Cls`` and ``pkg.module.Cls`` may also name a class component
(nightly's): its constructor takes the arguments and ``build(self) -> AppDef`` makes the app.

Only the module a name points to is imported, so a broken plugin breaks only its own names.
"""

from __future__ import annotations

import abc
import ast
import functools
import hashlib
import importlib
import importlib.util
import inspect
import pkgutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypeGuard

import attrs

from asynctorchx.errors import ComponentNotFoundException, ComponentValidationException
from asynctorchx.specs import file_linter
from asynctorchx.specs.api import AppDef
from asynctorchx.specs.file_linter import get_fn_docstring
from asynctorchx.util import entrypoints

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

#: The entry point group searched for user-registered component modules.
ENTRY_POINT_GROUP: str = "asynctorchx.components"
#: The package that holds the builtin components.
BUILTINS_PACKAGE: str = "asynctorchx.components"


@attrs.define
class ComponentDef:
    """A component found by name.

    Args:
        name: its name (``utils.echo``, ``path/to/file.py:fn``).
        fn: the function returning the :class:`AppDef` (a class's: ``cls(...).build()``).
        description: the first part of its docstring.
        module: the name of the module defining it.
        path: its source file (``None`` if unknown).
        validation_errors: the linter errors; a component with any is not runnable.
    """

    name: str
    fn: Callable[..., AppDef]
    description: str
    module: str
    path: str | None = None
    validation_errors: list[str] = attrs.field(factory=list)

    @property
    def fn_name(self) -> str:
        """The component function's name (``echo`` for ``utils.echo``)."""
        return self.name.rpartition(":" if ":" in self.name else ".")[2]


def module_relname(module: ModuleType, relative_to: ModuleType) -> str:
    """Return ``module``'s name relative to ``relative_to`` (``torchx.specs.finder``).

    Raises:
        ValueError: ``module`` is not ``relative_to`` nor one of its submodules.
    """
    name, base = module.__name__, relative_to.__name__
    if name == base:
        return ""
    if not name.startswith(base + "."):
        raise ValueError(f"`{name}` is not a submodule of `{base}`")
    return name[len(base) + 1 :]


def _lint(path: str | None, fn_name: str) -> list[str]:
    if path is None:
        return ["the source file of the function is unknown, so it cannot be checked"]
    return [message.description for message in file_linter.validate(path, fn_name)]


def _component_def(
    module: ModuleType,
    fn_name: str,
    fn: Callable[..., AppDef],
    name: str,
    errors: list[str] | None = None,
) -> ComponentDef:
    """The component ``name``, linted unless its ``errors`` are given."""
    path = getattr(module, "__file__", None)
    errors = _lint(path, fn_name) if errors is None else errors
    if inspect.isclass(fn):
        if not callable(getattr(fn, "build", None)):  # not even inherited
            add = "add `def build(self) -> AppDef` that returns the app"
            errors = [*errors, f"class {fn_name!r} has no `build` method: {add}"]
        fn = _built(fn)
    return ComponentDef(
        name=name,
        fn=fn,
        description=get_fn_docstring(fn)[0],
        module=module.__name__,
        path=str(Path(path).resolve()) if path else None,
        validation_errors=errors,
    )


def _built(cls: type) -> Callable[..., AppDef]:
    """The component function of a class component, with the class's signature and docstring."""

    @functools.wraps(cls, updated=())
    def component(*args: object, **kwargs: object) -> AppDef:
        app: AppDef = cls(*args, **kwargs).build()
        return app

    return component


def _is_candidate(
    fn: object, module: ModuleType, fn_name: str, *, classes: bool = False
) -> TypeGuard[Callable[..., AppDef]]:
    kind = inspect.isfunction(fn) or (classes and inspect.isclass(fn))
    return kind and not fn_name.startswith("_") and getattr(fn, "__module__", "") == module.__name__


def _components_of(base: ModuleType, prefix: str) -> dict[str, ComponentDef]:
    found: dict[str, ComponentDef] = {}
    tree = pkgutil.walk_packages(getattr(base, "__path__", []), prefix=f"{base.__name__}.")
    for module in [base, *(importlib.import_module(info.name) for info in tree)]:
        rel = module_relname(module, base)
        for fn_name, fn in inspect.getmembers(module, inspect.isfunction):
            if _is_candidate(fn, module, fn_name):
                name = ".".join(part for part in (prefix, rel, fn_name) if part)
                found[name] = _component_def(module, fn_name, fn, name)
    return found


def _submodule(base: ModuleType, rel: str) -> ModuleType | None:
    module = base
    for part in rel.split(".") if rel else []:
        path = getattr(module, "__path__", None)
        if path is None or not any(info.name == part for info in pkgutil.iter_modules(path)):
            return None
        module = importlib.import_module(f"{module.__name__}.{part}")
    return module


def _component_in(base: ModuleType, rest: str, name: str) -> ComponentDef | None:
    rel, _, fn_name = rest.rpartition(".")
    module = _submodule(base, rel) if fn_name else None
    if module is None:
        return None
    fn = getattr(module, fn_name, None)
    return _component_def(module, fn_name, fn, name) if _is_candidate(fn, module, fn_name) else None


class ComponentsFinder(abc.ABC):
    """Finds a set of components (``torchx.specs.finder.ComponentsFinder``)."""

    @abc.abstractmethod
    def find(self) -> list[ComponentDef]:
        """Return the components found, valid or not (see ``validation_errors``)."""


class ModuleComponentsFinder(ComponentsFinder):
    """A module tree's public functions, named ``<group>.<rel>.<fn>`` (``torchx.specs.finder``).

    Args:
        module: the module, or its importable name.
        group: the prefix of every name (``""``: none).

    Raises:
        ModuleNotFoundError: ``module`` is a name that does not import.
    """

    def __init__(self, module: str | ModuleType, group: str) -> None:
        self.base_module = importlib.import_module(module) if isinstance(module, str) else module
        self.group = group

    def find(self) -> list[ComponentDef]:
        """Return every public function of the module tree, each linted."""
        return list(_components_of(self.base_module, self.group).values())


class CustomComponentsFinder(ComponentsFinder):
    """The component ``function_name`` of the file ``filepath`` (``torchx.specs.finder``).

    Args:
        filepath: the Python file.
        function_name: the top-level function in it.
    """

    def __init__(self, filepath: str, function_name: str) -> None:
        self._filepath = filepath
        self._function_name = function_name

    def find(self) -> list[ComponentDef]:
        """Return ``[component]``.

        Raises:
            ComponentNotFoundException: no such file, or no such top-level function.
        """
        return [_load_file(self._filepath, self._function_name)]


def _entry_point_module(entry_point: EntryPoint) -> ModuleType:
    loaded = entry_point.load()
    return loaded if isinstance(loaded, ModuleType) else importlib.import_module(entry_point.value)


def _entry_point_prefix(entry_point: EntryPoint) -> str:
    return "" if entry_point.name.startswith("_") else entry_point.name


def _load_components() -> dict[str, ComponentDef]:
    components = _components_of(importlib.import_module(BUILTINS_PACKAGE), "")
    for entry_point in entrypoints.entry_points(ENTRY_POINT_GROUP):
        module = _entry_point_module(entry_point)
        components.update(_components_of(module, _entry_point_prefix(entry_point)))
    return components


def _find_component(name: str) -> ComponentDef | None:
    for entry_point in reversed(list(entrypoints.entry_points(ENTRY_POINT_GROUP))):
        prefix = _entry_point_prefix(entry_point)
        if prefix and not name.startswith(prefix + "."):
            continue
        rest = name.removeprefix(prefix + ".") if prefix else name
        found = _component_in(_entry_point_module(entry_point), rest, name)
        if found is not None:
            return found
    return _component_in(importlib.import_module(BUILTINS_PACKAGE), name, name)


#: The last scan (TorchX's name: code that resets it to ``None`` still works).
_components: dict[str, ComponentDef] | None = None


def _all_components() -> dict[str, ComponentDef]:
    global _components
    if _components is None:
        _components = _load_components()
    return _components


def reload() -> None:
    """Forget the cached builtins and entry points; the next lookup scans them again."""
    global _components
    _components = None


def get_components() -> dict[str, ComponentDef]:
    """Return every valid builtin and registered component, keyed by name."""
    return {name: c for name, c in _all_components().items() if not c.validation_errors}


def _load_file(file_part: str, fn_name: str, name: str | None = None) -> ComponentDef:
    """Import ``fn_name`` from the file ``file_part`` unless the linter finds errors."""
    name = name or f"{file_part}:{fn_name}"
    path = Path(file_part).expanduser()
    if not path.is_file():
        raise ComponentNotFoundException(
            f"component file {str(path)!r} (from {name!r}) does not exist: give a path"
            f" relative to {Path.cwd()} or an absolute one"
        )
    errors = _lint(str(path), fn_name)
    if any("not found at the top level" in error for error in errors):
        raise ComponentNotFoundException(
            f"no function or class {fn_name!r} is defined at the top level of {str(path)!r}"
        )
    resolved = path.resolve()
    if errors:  # not imported: a broken component is described, never run
        return ComponentDef(
            name=name,
            fn=_not_loaded(name),
            description="",
            module="",
            path=str(resolved),
            validation_errors=errors,
        )
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
    return _component_def(module, fn_name, getattr(module, fn_name), name, errors=[])


def _not_loaded(name: str) -> Callable[..., AppDef]:
    def refuse(*args: object, **kwargs: object) -> AppDef:
        raise ComponentValidationException(f"component {name!r} is not valid; see its errors")

    return refuse


def _is_module_path(path: str) -> bool:
    return all(part.isidentifier() for part in path.split("."))


def _module_component(module_path: str, fn_name: str, name: str) -> ComponentDef | None:
    """The function or class ``fn_name`` of the module ``module_path``; ``None``: no such module."""
    if not _is_module_path(module_path):
        return None
    try:
        if importlib.util.find_spec(module_path) is None:
            return None
    except (ImportError, ValueError):  # a missing parent package, or one that is no package
        return None
    module = importlib.import_module(module_path)
    fn = getattr(module, fn_name, None)
    if not _is_candidate(fn, module, fn_name, classes=True):
        raise ComponentNotFoundException(
            f"module {module_path!r} (from {name!r}) defines no component function or class"
            f" {fn_name!r}"
        )
    return _component_def(module, fn_name, fn, name)


def get_component(name: str) -> ComponentDef:
    """Return the component called ``name``: ``utils.echo``, a registered name, ``file.py:fn``,
    or a function of an importable module, ``pkg.module.fn`` or ``pkg.module:fn`` (nightly's).
    Where a file or module is named, ``fn`` may be a class with a ``build(self) -> AppDef``.

    Raises:
        ComponentNotFoundException: no such component, file or function.
        ComponentValidationException: the function breaks a component rule (listed).
    """
    file_part, colon, fn_name = name.rpartition(":")
    if colon and (not file_part or not fn_name):
        raise ComponentNotFoundException(
            f"{name!r} is not a component name: use a builtin (`utils.echo`) or"
            " `path/to/file.py:function`"
        )
    component: ComponentDef | None = None
    if colon:
        if not Path(file_part).expanduser().is_file():
            component = _module_component(file_part, fn_name, name)
        component = component or _load_file(file_part, fn_name, name)  # its error says why
    else:
        component = _components.get(name) if _components is not None else _find_component(name)
    if component is None and "." in name:  # `pkg.module.fn`, as torchx-nightly
        module_path, _, fn_name = name.rpartition(".")
        component = _module_component(module_path, fn_name, name)
    if component is None:
        import difflib

        close = difflib.get_close_matches(name, _all_components().keys(), n=3)
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


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _used_names(node: ast.AST) -> set[str]:
    names = [n for n in ast.walk(node) if isinstance(n, ast.Name)]
    stored = {n.id for n in names if isinstance(n.ctx, ast.Store)}
    return {n.id for n in names if isinstance(n.ctx, ast.Load)} - stored


def _helpers_of(module_source: str, fn_name: str) -> list[str]:
    """The module-level definitions ``fn_name`` uses, transitively, in file order."""
    tree = ast.parse(module_source)
    definitions = {
        name: node
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.FunctionDef | ast.ClassDef)
        for name in _defined_names(node)
    }
    needed: set[str] = set()
    pending = [definitions[fn_name]] if fn_name in definitions else []
    while pending:
        for name in _used_names(pending.pop()) - needed:
            if name in definitions and name != fn_name:
                needed.add(name)
                pending.append(definitions[name])
    chosen = [node for node in tree.body if _defined_names(node) & needed]
    return [ast.get_source_segment(module_source, node) or "" for node in chosen]


def get_builtin_source(name: str) -> str:
    """Return the source of the component ``name``, to copy into a file (``torchx.specs.finder``).

    The file's imports, then the module-level helpers the component uses, then the function.

    Raises:
        ComponentNotFoundException: no component has that name.
        ComponentValidationException: the component breaks a rule.
        OSError: its source file cannot be read.
    """
    component = get_component(name)
    fn_name = component.fn_name
    source_file = inspect.getsourcefile(component.fn) or component.path or ""
    module_source = Path(source_file).read_text(encoding="utf-8")
    imports = [
        ast.get_source_segment(module_source, node) or ""
        for node in ast.parse(module_source).body
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    parts = [*_helpers_of(module_source, fn_name), inspect.getsource(component.fn)]
    return "\n".join(imports) + "\n\n\n" + "\n\n\n".join(part.rstrip() for part in parts) + "\n"
