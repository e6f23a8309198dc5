"""scripts/import_circles.py (``make lint``): every kind of import closes a circle — at module
level, inside a function, under ``if TYPE_CHECKING:``, relative — and a circle fails the check
naming the lines that close it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "import_circles.py"


@pytest.fixture(scope="module")
def circles() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_circles", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


TYPE_ONLY = {
    "a.py": "from pkg.b import B\n",
    "b.py": (
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    from pkg.a import A\n\nclass B: ...\n"
    ),
}


@pytest.mark.parametrize(
    "files",
    [
        pytest.param(TYPE_ONLY, id="type-checking"),
        pytest.param(
            {"a.py": "import pkg.b\n", "b.py": "def f():\n    from pkg import a\n"},
            id="inside-a-function",
        ),
        pytest.param(
            {
                "sub/__init__.py": "",
                "sub/a.py": "from . import b\n",
                "sub/b.py": "from .a import x\n",
            },
            id="relative",
        ),
        pytest.param(
            {"a.py": "from pkg import c\n", "c.py": "from pkg.a import y\n"},
            id="from-a-package-import-a-module",
        ),
    ],
)
def test_every_kind_of_import_closes_a_circle(
    circles: ModuleType, tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root = package(tmp_path, files)
    assert circles.main([str(root)]) == 1
    out = capsys.readouterr().out
    assert "1 import circle(s)" in out


def test_a_circle_names_its_modules_and_the_lines_that_close_it(
    circles: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = package(tmp_path, TYPE_ONLY)
    circles.main([str(root)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "pkg.a <-> pkg.b"
    assert f"    {root / 'a.py'}:1: pkg.a imports pkg.b" in lines
    assert f"    {root / 'b.py'}:4: pkg.b imports pkg.a" in lines


def test_downward_imports_are_no_circle(
    circles: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a module importing its own package, a name its package defines, and a chain a → b → c
    root = package(
        tmp_path,
        {
            "__init__.py": "VERSION = 1\n",
            "a.py": "import pkg\nfrom pkg import VERSION\nfrom pkg.b import x\n",
            "b.py": "from pkg.c import y\nx = y\n",
            "c.py": "from pkg import VERSION\ny = VERSION\n",
        },
    )
    assert circles.main([str(root)]) == 0
    assert capsys.readouterr().out == f"no import circles in {root}\n"


def test_a_module_importing_a_sibling_module_of_its_package_is_not_a_circle_with_the_package(
    circles: ModuleType, tmp_path: Path
) -> None:
    # `from pkg import b` in a.py loads pkg.b, not pkg's __init__ (which imports a)
    root = package(
        tmp_path, {"__init__.py": "from pkg import a\n", "a.py": "from pkg import b\n", "b.py": ""}
    )
    assert circles.main([str(root)]) == 0


def test_two_circles_are_two(circles: ModuleType, tmp_path: Path) -> None:
    files = {
        "a.py": "import pkg.b\n",
        "b.py": "import pkg.a\n",
        "c.py": "import pkg.d\n",
        "d.py": "import pkg.c\nimport pkg.a\n",
    }
    graph = circles.import_graph(package(tmp_path, files))
    assert circles.circles(graph) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]


def test_not_a_folder_is_a_usage_error(circles: ModuleType, tmp_path: Path) -> None:
    assert circles.main([str(tmp_path / "missing")]) == 2
