"""The package's modules import each other without cycles, and each part of
the package imports only the parts below it (CONTRIBUTING.md, "Parts").

The graph is read from the source (``ast``), not from ``sys.modules`` after an
import, so it also sees the imports inside functions (the lazy ones, which a
cycle can hide behind until the one call path that runs them).

Imports under ``if TYPE_CHECKING:`` never run, so they cannot leave a module
half-initialised; the runtime graph leaves them out. They still tie the code
together, so the layering rules and a second cycle check count them too: a
type a lower part needs from a higher one is written as a protocol below.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

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


def _all_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement at any depth, those for type checkers included."""
    return (node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom))


def import_graph(package: Path, *, type_only: bool = False) -> dict[str, set[str]]:
    """Which of the package's modules each of its modules imports (with
    ``type_only``, counting the imports under ``if TYPE_CHECKING:`` too).

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a
    module, else as importing ``pkg`` (whose ``__init__`` defines ``name``).
    """
    modules = _modules(package)
    imports = _all_imports if type_only else _runtime_imports
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        for node in imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
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


@pytest.mark.parametrize("type_only", [False, True], ids=["at-run-time", "type-only-imports-too"])
def test_flask_mcp_has_no_import_cycle(type_only: bool) -> None:
    graph = import_graph(PACKAGE, type_only=type_only)
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
    assert cycles(import_graph(package, type_only=True)) == [["pkg.a", "pkg.b"]]


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


#: The parts of the package, and which other parts each may import (its own
#: modules aside), type-only imports included. A folder is a part with all its
#: subfolders; a module at the top is a part of its own. Every module belongs
#: to one part: a new one must be given its place here (and in CONTRIBUTING.md).
PARTS: dict[str, frozenset[str]] = {
    "protocol": frozenset(),
    "config": frozenset(),
    "environment": frozenset({"config"}),
    "gunicorn_conf": frozenset({"http"}),
    "coroutines": frozenset(),
    "backends": frozenset({"protocol"}),
    "errors": frozenset({"protocol"}),
    "testing": frozenset({"protocol"}),
    "asking": frozenset({"protocol", "errors"}),
    "auth": frozenset({"protocol", "backends", "config", "errors", "coroutines"}),
    "telemetry": frozenset({"protocol", "backends"}),
    "context": frozenset({"protocol", "asking", "auth", "config", "errors"}),
    "tasks": frozenset({"protocol", "auth", "telemetry"}),
    "features": frozenset({"protocol", "auth", "context", "config", "errors", "coroutines"}),
    "http": frozenset({"protocol", "backends", "auth", "telemetry", "config", "errors"}),
}
#: The parts that sit on everything else: the command line (all but the
#: extension, which adds it), the extension, and the package's public names.
PARTS["cli"] = frozenset(PARTS)
PARTS["extension"] = frozenset(PARTS) - {"extension"}
PARTS["__init__"] = frozenset(PARTS) - {"__init__"}
#: The folders among the parts (each has an ``__init__`` docstring naming what it may import).
FOLDERS = sorted(name for name in PARTS if (PACKAGE / name).is_dir())


def part_of(module: str) -> str:
    """``flask_mcp.auth.oauth.server`` -> ``auth``; ``flask_mcp.context`` -> ``context``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_belongs_to_a_part_with_rules() -> None:
    unplaced = sorted(m for m in _modules(PACKAGE) if part_of(m) not in PARTS)
    assert unplaced == [], "give each new part its rules in PARTS (and CONTRIBUTING.md, 'Parts')"


def test_each_part_imports_only_the_parts_it_may() -> None:
    graph = import_graph(PACKAGE, type_only=True)
    crossings = [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if part_of(target) != part_of(module) and part_of(target) not in PARTS[part_of(module)]
    ]
    assert crossings == []


def test_the_layering_rules_the_issue_named_hold_in_the_table() -> None:
    """The core imports no other part; authentication, telemetry and the task
    runners never import the WSGI layer; nothing but the extension, the command
    line and the package's public names sits above the declared features."""
    assert PARTS["protocol"] == frozenset()
    assert all("http" not in PARTS[name] for name in ("auth", "telemetry", "tasks", "features", "backends"))
    assert {name for name, allowed in PARTS.items() if "extension" in allowed} == {"__init__"}
    importers_of_http = {name for name, allowed in PARTS.items() if "http" in allowed}
    assert importers_of_http == {"cli", "extension", "gunicorn_conf", "__init__"}


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_folder_says_what_lives_there_and_what_it_may_import(folder: str) -> None:
    init = PACKAGE / folder / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    assert len(docstring.split()) >= 20, f"flask_mcp/{folder}/__init__.py: say what lives there"
    assert "import" in docstring, f"flask_mcp/{folder}/__init__.py: say what it may import"
    unnamed = sorted(name for name in PARTS[folder] if f"``{name}``" not in docstring)
    if folder not in ("cli",):  # the command line's may-import is "every part but the extension"
        assert unnamed == [], f"flask_mcp/{folder}/__init__.py does not name what it may import: {unnamed}"


def test_every_subfolder_of_the_package_has_a_docstring() -> None:
    missing = [
        init.relative_to(PACKAGE.parent).as_posix()
        for init in sorted(PACKAGE.rglob("__init__.py"))
        if not ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    ]
    assert missing == []


def test_the_top_level_holds_at_most_a_dozen_modules() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top
