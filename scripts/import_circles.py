"""Fails on an import circle among the modules of a package folder (``make lint`` runs it).

usage: python scripts/import_circles.py src/testbed

Every import counts: at module level, inside functions, and under ``if TYPE_CHECKING:``. A
type-only back-edge is still a circle in the design — the two modules cannot be understood,
tested or moved apart — and hiding it behind TYPE_CHECKING or a function-level import only
moves the smell. import-linter's layers catch circles across layers; this catches them inside
one package folder, where no contract names the order.

Prints each circle with the import lines that close it and exits 1; prints "no import circles"
and exits 0 otherwise. Generated modules (``testbed.proto``) are left out.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

GENERATED = ("proto",)


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` imports ``target`` at ``line`` of its file."""

    source: str
    target: str
    line: int


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the package folder ``root``."""
    mods: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if GENERATED and any(part in GENERATED for part in parts[1:2]):
            continue
        mods[".".join(parts)] = path
    return mods


def _imported_names(node: ast.Import | ast.ImportFrom, package: str) -> Iterator[str]:
    """The dotted names an import statement may load: ``from X import y`` yields X.y and X."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, base] if base else parts)
    for alias in node.names:
        yield f"{base}.{alias.name}"
    yield base


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> list[Edge]:
    """The imports of module ``name`` that reach another module of the folder (all kinds)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    edges: dict[str, Edge] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        names = list(_imported_names(node, package))
        # ``from pkg import mod`` loads pkg.mod; the bare ``pkg`` counts only when no name
        # after ``import`` is a module of its own (then a name defined in pkg is imported).
        modules = [n for n in names[:-1] if n in mods] if isinstance(node, ast.ImportFrom) else []
        for candidate in modules or names:
            target = _owning_module(candidate, mods)
            # A module importing its own package (or an ancestor) is how Python loads it.
            if target and target != name and not name.startswith(target + "."):
                edges.setdefault(target, Edge(name, target, node.lineno))
    return list(edges.values())


def _owning_module(dotted: str, mods: dict[str, Path]) -> str:
    """The longest prefix of ``dotted`` that is a module of the folder ("" if none)."""
    while dotted and dotted not in mods:
        dotted = dotted.rsplit(".", 1)[0] if "." in dotted else ""
    return dotted


def circles(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[Edge]]] = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            edge = next(edges, None)
            if edge is not None:
                if edge.target not in index:
                    index[edge.target] = low[edge.target] = len(index)
                    stack.append(edge.target)
                    on_stack.add(edge.target)
                    work.append((edge.target, iter(graph[edge.target])))
                elif edge.target in on_stack:
                    low[node] = min(low[node], index[edge.target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def import_graph(root: Path) -> dict[str, list[Edge]]:
    """Every module under ``root`` -> its imports of other modules under ``root``."""
    mods = module_files(root)
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def main(argv: list[str]) -> int:
    """Print the circles under the folder named in ``argv``; 1 if there is any, else 0."""
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = Path(argv[0])
    graph = import_graph(root)
    files = module_files(root)
    found = circles(graph)
    for members in found:
        print(" <-> ".join(members))
        inside = set(members)
        for name in members:
            for edge in graph[name]:
                if edge.target in inside:
                    print(f"    {files[name]}:{edge.line}: {name} imports {edge.target}")
    if not found:
        print(f"no import circles in {root}")
        return 0
    print(f"{len(found)} import circle(s): move the shared type or function to the lower module")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
