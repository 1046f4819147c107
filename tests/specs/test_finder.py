"""Component resolution: builtins, files, entry points."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynctorchx.errors import ComponentNotFoundException, ComponentValidationException
from asynctorchx.specs import finder
from asynctorchx.specs.builders import materialize_appdef

BUILTINS = [
    "dist.ddp",
    "dist.spmd",
    "dist.torchrun",
    "metrics.tensorboard",
    "serve.torchserve",
    "utils.binary",
    "utils.booth",
    "utils.copy",
    "utils.echo",
    "utils.python",
    "utils.sh",
    "utils.touch",
]

COMPONENT_FILE = '''
from asynctorchx.specs import AppDef, Role

def greet(who: str = "world") -> AppDef:
    """Greets someone.

    Args:
        who: whom to greet
    """
    return AppDef(
        name="greet", roles=[Role("greet", "img", entrypoint="echo", args=[f"hello {who}"])]
    )

def broken(who) -> AppDef:
    """Broken.

    Args:
        who: whom
    """
    return AppDef(name="broken")

def _helper() -> int:
    return 1
'''


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    finder.reload()
    yield
    finder.reload()


def test_builtins_are_listed() -> None:
    components = finder.get_components()
    assert sorted(components) == BUILTINS
    echo = components["utils.echo"]
    assert echo.name == "utils.echo"
    assert echo.module == "asynctorchx.components.utils"
    assert echo.path is not None
    assert echo.path.endswith("components/utils.py")
    assert echo.description.startswith("Echos a message")
    assert echo.validation_errors == []


def test_helpers_and_invalid_functions_are_not_listed() -> None:
    components = finder.get_components()
    assert "dist.parse_nnodes" not in components
    assert "dist.get_role_name" not in components
    with pytest.raises(ComponentValidationException, match="parse_nnodes"):
        finder.get_component("dist.parse_nnodes")


def test_get_builtin_and_its_source() -> None:
    echo = finder.get_component("utils.echo")
    assert "def echo" in inspect.getsource(echo.fn)
    assert materialize_appdef(echo.fn, ["--msg", "hi"]).roles[0].args == ["hi"]


def test_unknown_name_suggests_close_ones() -> None:
    with pytest.raises(ComponentNotFoundException) as caught:
        finder.get_component("utils.ech")
    assert "'utils.ech'" in str(caught.value)
    assert "utils.echo" in str(caught.value)


def test_file_component(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "comps.py").write_text(COMPONENT_FILE)
    monkeypatch.chdir(tmp_path)
    component = finder.get_component("comps.py:greet")
    assert component.name == "comps.py:greet"
    assert component.path == str((tmp_path / "comps.py").resolve())
    assert component.description == "Greets someone."
    app = materialize_appdef(component.fn, ["--who", "you"])
    assert app.roles[0].args == ["hello you"]
    assert "def greet" in inspect.getsource(component.fn)
    absolute = finder.get_component(f"{tmp_path / 'comps.py'}:greet")
    assert absolute.path == component.path


def test_invalid_file_component_names_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "comps.py"
    path.write_text(COMPONENT_FILE)
    with pytest.raises(ComponentValidationException) as caught:
        finder.get_component(f"{path}:broken")
    assert "'who'" in str(caught.value)
    assert "no type annotation" in str(caught.value)


def test_file_component_not_found(tmp_path: Path) -> None:
    path = tmp_path / "comps.py"
    path.write_text(COMPONENT_FILE)
    with pytest.raises(ComponentNotFoundException, match="does not exist"):
        finder.get_component(f"{tmp_path / 'nope.py'}:greet")
    with pytest.raises(ComponentNotFoundException, match="'missing'"):
        finder.get_component(f"{path}:missing")
    with pytest.raises(ComponentNotFoundException):
        finder.get_component(f"{path}:")


def test_file_component_is_linted_before_it_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "side_effect.py"
    path.write_text(f"open({str(marker)!r}, 'w').close()\ndef comp(x):\n    pass\n")
    with pytest.raises(ComponentValidationException):
        finder.get_component(f"{path}:comp")
    assert not marker.exists()


def test_entry_point_components_merge_over_builtins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "my_comps"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "train.py").write_text(COMPONENT_FILE)
    (tmp_path / "my_utils.py").write_text(COMPONENT_FILE.replace("def greet", "def echo"))
    dist = tmp_path / "my_comps-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-comps\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[asynctorchx.components]\nfoo = my_comps\n_hidden = my_comps.sub.train\nutils = my_utils\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    finder.reload()
    components = finder.get_components()
    assert "foo.sub.train.greet" in components
    assert "greet" in components  # `_` prefix: no group name
    assert "foo.sub.train.broken" not in components
    assert components["utils.echo"].module == "my_utils"  # registered wins
    assert "utils.sh" in components  # the other builtins stay
    app = materialize_appdef(finder.get_component("greet").fn, [])
    assert app.roles[0].args == ["hello world"]


@pytest.mark.parametrize("name", ["utils.booth", "utils.copy", "utils.echo", "dist.ddp"])
def test_builtin_source_is_a_runnable_copy(name: str, tmp_path: Path) -> None:
    """`builtins --print` gives a file that defines the same component on its own,
    module-level constants the function uses included (booth's and copy's programs)."""
    source = finder.get_builtin_source(name)
    copied = tmp_path / "copied.py"
    copied.write_text(source)
    component = finder.get_component(f"{copied}:{name.partition('.')[2]}")
    argv = {
        "utils.booth": ["--x1", "1", "--x2", "3"],
        "utils.copy": ["--src", "a", "--dst", "b"],
        "utils.echo": [],
        "dist.ddp": ["--script", "train.py"],
    }[name]
    builtin = finder.get_component(name)
    assert materialize_appdef(component.fn, argv) == materialize_appdef(builtin.fn, argv)


def test_lookup_by_name_imports_only_the_named_module() -> None:
    """`run utils.echo` imports the builtin module `utils` alone (no other builtin, not
    `component_test_base` and its `unittest`), and finds what the full scan finds."""
    code = (
        "import sys\n"
        "from asynctorchx.specs import finder\n"
        "echo = finder.get_component('utils.echo')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('asynctorchx.components.'))\n"
        "print(loaded, 'unittest' in sys.modules, finder._components is None)\n"
        "scanned = finder._load_components()['utils.echo']\n"
        "print(echo == scanned)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["['asynctorchx.components.utils'] False True", "True"]


def test_lookup_by_name_of_an_invalid_builtin_names_the_rule() -> None:
    with pytest.raises(ComponentValidationException, match="parse_nnodes"):
        finder.get_component("dist.parse_nnodes")


@pytest.mark.parametrize(
    "name", ["utils.nope", "nope.echo", "utils.echo.x", "utils._helper", "utils.os", "echo"]
)
def test_lookup_by_name_of_no_component(name: str) -> None:
    """Unknown modules, functions, private names and imported functions are no component."""
    with pytest.raises(ComponentNotFoundException, match="`asynctorchx builtins` lists"):
        finder.get_component(name)


def _install_components(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entries: str) -> None:
    package = tmp_path / "my_comps"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "train.py").write_text(COMPONENT_FILE)
    (package / "plain").mkdir()  # a directory without __init__.py: not scanned
    (package / "plain" / "train.py").write_text(COMPONENT_FILE)
    (tmp_path / "my_utils.py").write_text(COMPONENT_FILE.replace("def greet", "def echo"))
    dist = tmp_path / "my_comps-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-comps\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[asynctorchx.components]\n" + entries)
    monkeypatch.syspath_prepend(str(tmp_path))
    finder.reload()


def test_lookup_by_name_finds_registered_components_as_the_scan_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_components(
        tmp_path, monkeypatch, "foo = my_comps\n_hidden = my_comps.sub.train\nutils = my_utils\n"
    )
    assert finder.get_component("utils.echo").module == "my_utils"  # registered wins
    assert finder.get_component("utils.sh").module == "asynctorchx.components.utils"
    assert finder.get_component("foo.sub.train.greet").module == "my_comps.sub.train"
    assert finder.get_component("greet").module == "my_comps.sub.train"  # `_`: no prefix
    with pytest.raises(ComponentValidationException, match="'who'"):
        finder.get_component("foo.sub.train.broken")
    assert finder._components is None  # none of these scanned everything
    with pytest.raises(ComponentNotFoundException):
        finder.get_component("foo.plain.train.greet")  # not a package: the scan skips it
    scanned = finder._load_components()
    for name in ("utils.echo", "utils.sh", "foo.sub.train.greet", "greet"):
        finder.reload()
        assert finder.get_component(name) == scanned[name]


def test_a_broken_plugin_breaks_only_its_own_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_components(tmp_path, monkeypatch, "foo = my_comps\nbroken = no_such_module\n")
    assert finder.get_component("utils.echo").module == "asynctorchx.components.utils"
    assert finder.get_component("foo.sub.train.greet").module == "my_comps.sub.train"
    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        finder.get_component("broken.echo")
