"""No import loops anywhere in the package: not between its top-level parts (model, engine, daemon, tsbatch,
cli, ...), not between the sub-packages of a part (daemon/round, daemon/state, ...), not between two modules.

One check covers all three: for every package, its children (sub-packages and modules, each standing for
everything under it) must import each other without a loop. The graph is read from the source with ast,
so an import inside a function counts as much as one at the top: a loop hidden in a function still ties
two modules together, and so does a type-only one under ``if TYPE_CHECKING:`` (the names a module needs
to spell its types are part of what it depends on; a type both sides need belongs below both).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tesserae_slurm"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement at any depth: in functions and under ``if TYPE_CHECKING:`` too."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The package modules an import runs: ``from p import m`` is module ``p.m`` when there is one, else ``p``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[:len(parts) - (node.level - 1)]
        base = ".".join([*parts, node.module] if node.module else parts)
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]


def module_edges(root: Path) -> dict[str, set[str]]:
    """module -> the package modules it imports."""
    top = root.name
    paths = sorted(root.rglob("*.py"))
    known = {_module_name(p, root) for p in paths}
    edges: dict[str, set[str]] = {}
    for path in paths:
        module = _module_name(path, root)
        out = edges.setdefault(module, set())
        for node in _imports(ast.parse(path.read_text(), str(path))):
            out.update(t for t in _targets(node, module, path.name == "__init__.py", known)
                       if (t == top or t.startswith(top + ".")) and t != module)
    return edges


def packages(edges: Mapping[str, set[str]]) -> list[str]:
    """Every package (a module that has modules under it)."""
    return sorted({m.rsplit(".", 1)[0] for m in edges if "." in m})


def child_of(package: str, module: str) -> str | None:
    """The child of ``package`` that ``module`` lies in (itself a module or a sub-package), or None."""
    if not module.startswith(package + "."):
        return None
    return module[len(package) + 1:].split(".")[0]


def child_graph(edges: Mapping[str, set[str]], package: str) -> dict[str, dict[str, list[str]]]:
    """child -> child it imports -> the imports that make the edge (``module -> target``), inside ``package``.

    A package's own ``__init__`` is no child: it gathers names from its children, and a child importing
    the package by name means importing one of them (which the edge to that child shows)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for module, targets in edges.items():
        a = child_of(package, module)
        if a is None:
            continue
        for t in sorted(targets):
            b = child_of(package, t)
            if b is not None and a != b:
                graph.setdefault(a, {}).setdefault(b, []).append(f"{module} -> {t}")
    return graph


def cycles(graph: Mapping[str, Mapping[str, object]]) -> list[list[str]]:
    """The strongly connected parts with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def loops(root: Path) -> dict[str, list[str]]:
    """package -> one line per edge inside each loop among its children."""
    edges = module_edges(root)
    out: dict[str, list[str]] = {}
    for package in packages(edges):
        graph = child_graph(edges, package)
        for comp in cycles(graph):
            out.setdefault(package, []).extend(
                f"{a} -> {b}: {', '.join(graph[a][b][:3])}" for a in comp for b in comp if b in graph.get(a, {}))
    return out


def test_no_import_loop_between_parts_sub_packages_or_modules():
    found = loops(PACKAGE)
    assert not found, "import loops:\n" + "\n".join(f"in {p}: {line}" for p, lines in found.items() for line in lines)


def test_a_loop_is_found_at_every_level(tmp_path):
    """The check itself: loops closed by a function-local import, by a type-only import, between two modules
    of one package and between two sub-packages are each reported; a one-way import is not."""
    pkg = tmp_path / "tesserae_slurm"
    files = {
        "a/m.py": "from ..b import x\n",
        "b/m.py": "def f():\n    from ..a import y\n",  # parts a <-> b, inside a function
        "c/one.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .two import T\n",
        "c/two.py": "from . import one\n",  # modules c.one <-> c.two, one side type-only
        "d/low/x.py": "from ..high import y\n",
        "d/high/y.py": "from ..low.x import z\n",  # sub-packages d.low <-> d.high
        "e/m.py": "from ..a.m import x\nfrom . import n\n",  # one way only: no loop
        "e/n.py": "",
    }
    for name, body in files.items():
        path = pkg / name
        for d in [pkg, *(pkg / p for p in reversed(path.relative_to(pkg).parents))]:
            d.mkdir(parents=True, exist_ok=True)
            (d / "__init__.py").touch()
        path.write_text(body)
    found = loops(pkg)
    assert sorted(found) == ["tesserae_slurm", "tesserae_slurm.c", "tesserae_slurm.d"]
    assert {line.split(":")[0] for line in found["tesserae_slurm"]} == {"a -> b", "b -> a"}
    assert {line.split(":")[0] for line in found["tesserae_slurm.c"]} == {"one -> two", "two -> one"}
    assert {line.split(":")[0] for line in found["tesserae_slurm.d"]} == {"low -> high", "high -> low"}
