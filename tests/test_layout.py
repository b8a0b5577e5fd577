"""The layout of the test suite (CONTRIBUTING.md, "Where tests go"): folders
that mirror the package, and file names pytest can import.

pytest imports test modules by their base name (the folders are not
packages, and helpers are imported as ``from conftest import ...``), so two
files of the same name in different folders break collection with an
"import file mismatch" that names neither the rule nor the fix."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from conftest import ROOT

TESTS = ROOT / "tests"
#: Folders of the suite that mirror a subpackage of flask_mcp.
MIRRORS = ("protocol", "backends", "features", "features/skills", "auth", "auth/oauth", "http", "telemetry", "tasks",
           "cli")
#: Third-party files installed into the test tree (the conformance suite's npm packages).
VENDORED = "node_modules"


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if VENDORED not in p.relative_to(TESTS).parts)


def folders_with_tests() -> set[str]:
    return {p.parent.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py")} - {"."}


def test_the_folders_that_mirror_the_package_exist_and_hold_tests() -> None:
    for name in MIRRORS:
        assert (ROOT / "flask_mcp" / name / "__init__.py").is_file(), f"flask_mcp/{name} is no longer a subpackage"
        assert list((TESTS / name).glob("test_*.py")), f"tests/{name}/ holds no test file"
    assert list((TESTS / "e2e").glob("test_*.py")), "tests/e2e/ holds no test file"


def test_every_python_file_under_tests_has_a_name_of_its_own() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in python_files():
        by_name[path.name].append(path.relative_to(ROOT).as_posix())
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert clashes == {}, f"pytest imports by base name: rename one of each of {clashes}"


def test_no_test_folder_is_a_package() -> None:
    """An ``__init__.py`` would make pytest import that folder's files by a
    dotted name, and ``from conftest import ...`` would stop meaning one module."""
    packages = [p.relative_to(ROOT).as_posix() for p in python_files() if p.name == "__init__.py"]
    assert packages == []


def test_contributing_describes_every_folder_that_holds_tests() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text[text.index("## Where tests go"):]
    described = set(re.findall(r"^tests/([a-z0-9_/]+)/ ", section, flags=re.MULTILINE))
    assert set(MIRRORS) | {"e2e"} <= described
    assert folders_with_tests() <= described, "describe the new folder in CONTRIBUTING.md, 'Where tests go'"


def test_every_subpackage_of_flask_mcp_has_a_test_folder() -> None:
    """The suite mirrors the package: a new folder of flask_mcp/ gets its own under tests/ (a backend's
    own subpackage, such as backends/sqlite/, is tested in tests/backends/test_<name>.py)."""
    package = ROOT / "flask_mcp"
    subpackages = {p.parent.name for p in package.glob("*/__init__.py")}
    assert subpackages <= set(MIRRORS), f"add tests/<folder>/ (and MIRRORS) for {sorted(subpackages - set(MIRRORS))}"
