"""The package's modules import each other without cycles.

The graph is read from the source (``ast``), not from ``sys.modules`` after an
import, so it also sees the imports inside functions (the lazy ones, which a
cycle can hide behind until the one call path that runs them).

Imports under ``if TYPE_CHECKING:`` are left out: they never run, so they
cannot leave a module half-initialised, and they are how an annotation names
a type from a layer above without depending on it at run time.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "flask_mcp"


def _modules(package: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of ``package`` by dotted name, with its file and whether it is a package."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run, at any depth, except under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _runtime_imports(ast.Module(body=[child], type_ignores=[]))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _runtime_imports(node)


def import_graph(package: Path) -> dict[str, set[str]]:
    """Which of the package's modules each of its modules imports.

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a
    module, else as importing ``pkg`` (whose ``__init__`` defines ``name``).
    """
    modules = _modules(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names if alias.name in modules)
                continue
            if node.level:
                base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in modules:
                    graph[name].add(f"{target}.{alias.name}")
                elif target in modules:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _describe(graph: dict[str, set[str]], component: list[str]) -> str:
    edges = [f"  {m} -> {', '.join(sorted(graph[m] & set(component)))}" for m in component]
    return "\n".join([f"cycle of {len(component)} modules:", *edges])


def test_flask_mcp_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE)
    assert "flask_mcp.protocol.server" in graph  # the graph did find the package
    found = cycles(graph)
    assert found == [], "\n".join(_describe(graph, c) for c in found)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import B\n",
            "pkg/b.py": "class B:\n    def run(self):\n        from . import a\n        return a\n",
            "pkg/c.py": "import pkg.a\n",
        },
    )
    assert cycles(import_graph(package)) == [["pkg.a", "pkg.b"]]


def test_a_cycle_through_nested_packages_and_absolute_imports_is_found(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "from .x import X\n",
            "pkg/sub/x.py": "from ..top import T\nX = T\n",
            "pkg/top.py": "def f():\n    import pkg.sub\n    return pkg.sub\nT = 1\n",
        },
    )
    assert cycles(import_graph(package)) == [["pkg.sub", "pkg.sub.x", "pkg.top"]]


def test_an_import_only_for_type_checking_is_not_a_cycle(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import B\n",
            "pkg/b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from .a import A\n"
                "else:\n    import json\n"
                "class B: ...\n"
            ),
        },
    )
    graph = import_graph(package)
    assert graph["pkg.b"] == set()
    assert cycles(graph) == []


def test_no_protocol_module_imports_flask_or_werkzeug_even_inside_a_function() -> None:
    """``test_sansio.py`` checks what importing the core loads; this also sees the lazy imports."""
    offenders = []
    for name, (path, _) in _modules(PACKAGE).items():
        if not name.startswith("flask_mcp.protocol"):
            continue
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            offenders += [f"{name}: {n}" for n in names if n.split(".")[0] in ("flask", "werkzeug")]
    assert offenders == []


#: Which parts of the package each layer may import (CONTRIBUTING.md, "Layers").
LAYERS = {
    "flask_mcp.protocol": ("flask_mcp.protocol",),
    "flask_mcp.backends": ("flask_mcp.backends", "flask_mcp.protocol"),
}


def test_each_layer_imports_only_the_layers_below_it() -> None:
    graph = import_graph(PACKAGE)
    crossings = [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        for layer, allowed in LAYERS.items()
        if module == layer or module.startswith(layer + ".")
        for target in sorted(targets)
        if not any(target == a or target.startswith(a + ".") for a in allowed)
    ]
    assert crossings == []
