"""No import cycles between the package's top-level parts (model, engine, daemon, tsbatch, cli, ...).

The graph is read from the source with ast, so function-local imports count as much as module-level
ones: a cycle hidden inside a function still ties two layers together. Imports under ``if TYPE_CHECKING:``
are left out: they never run, and an annotation naming a type that a caller hands in (tsbatch takes the
daemon's configuration as a value) is not a load-order dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tesserae_slurm"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, outside ``if TYPE_CHECKING:`` bodies."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]))
        else:
            yield from _imports(node)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level == 0:
        return [node.module or ""]
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return [".".join([*base, node.module] if node.module else base)]


def module_edges(root: Path) -> dict[str, set[str]]:
    """module -> the package modules it imports."""
    top = root.name
    edges: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        out = edges.setdefault(module, set())
        for node in _imports(ast.parse(path.read_text(), str(path))):
            out.update(t for t in _targets(node, module, path.name == "__init__.py")
                       if t == top or t.startswith(top + "."))
    return edges


def part_of(module: str) -> str:
    """The top-level part a module belongs to: ``tesserae_slurm.daemon.loop`` -> ``daemon``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def part_graph(edges: Mapping[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    """part -> part it imports -> the imports that make the edge (``module -> target``)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for module, targets in edges.items():
        for t in sorted(targets):
            a, b = part_of(module), part_of(t)
            if a != b and b != "__init__":  # the package root holds only __version__
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


def test_no_import_cycle_between_top_level_parts():
    graph = part_graph(module_edges(PACKAGE))
    found = cycles(graph)
    detail = [f"{a} -> {b}: {', '.join(graph[a][b][:3])}" for comp in found for a in comp for b in comp
              if b in graph.get(a, {})]
    assert not found, "import cycles between parts of the package:\n" + "\n".join(detail)


def test_a_cycle_is_found(tmp_path):
    """The check itself: a function-local import that closes a loop is reported."""
    pkg = tmp_path / "tesserae_slurm"
    for part, body in (("a", "from ..b import x\n"), ("b", "def f():\n    from ..a import y\n"),
                       ("c", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import z\n")):
        (pkg / part).mkdir(parents=True)
        (pkg / part / "__init__.py").write_text("")
        (pkg / part / "m.py").write_text(body)
    (pkg / "__init__.py").write_text("")
    graph = part_graph(module_edges(pkg))
    assert cycles(graph) == [["a", "b"]]
    assert "c" not in graph  # a type-only import is no edge
