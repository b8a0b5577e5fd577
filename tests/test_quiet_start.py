"""No noise on a correct setup: the apps a newcomer starts first -- the README's
first app, the tutorial's, the example bookshop -- start and answer without a
single warning (Python warnings, or log records at WARNING and above), and the
example starts without its optional extras, saying once which extra brings
what it left out.

Each app runs in a fresh interpreter (its module-level MCP, its logging and
its imports of its own), as ``flask run`` or gunicorn would import it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from test_docs import blocks_of

#: Imports the app's module with every warning and every log record at WARNING and
#: above kept, then asks it for its tools on both protocol generations.
HARNESS = """
import importlib, json, logging, sys, warnings

records = []


class Keep(logging.Handler):
    def emit(self, record):
        records.append(f"{record.name} {record.levelname}: {record.getMessage()}")


logging.basicConfig(level=logging.WARNING, handlers=[Keep()])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    module = importlib.import_module(sys.argv[1])
    app = module.app if hasattr(module, "app") else module.create_app()  # an app, or a factory
    from flask_mcp.testing import MCPTestClient

    tools = MCPTestClient(app).list_tools().result["tools"]
    legacy = MCPTestClient(app, protocol_version="2025-11-25")
    legacy.initialize()
    legacy.list_tools()
print(json.dumps({"tools": [tool["name"] for tool in tools], "logged": records,
                  "warned": [f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}" for w in caught]}))
"""


def _child_environment(**extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLASK_") and k != "PYTHONWARNINGS"}
    environ["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT), environ.get("PYTHONPATH", "")] if p)
    return {**environ, **extra}


def start(module: str, cwd: Path, *, prelude: str = "", **env: str) -> dict[str, Any]:
    """Start ``module``'s app in a child interpreter; what it warned and logged."""
    done = subprocess.run([sys.executable, "-c", prelude + HARNESS, module], cwd=cwd, env=_child_environment(**env),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M)


def test_the_readme_first_app_starts_without_a_warning(tmp_path: Path) -> None:
    (tmp_path / "calculator.py").write_text(_python_blocks(ROOT / "README.md")[0])
    report = start("calculator", tmp_path)
    assert report["tools"] == ["add"]
    assert report["logged"] == [] and report["warned"] == []


def test_the_tutorial_apps_start_without_a_warning(tmp_path: Path) -> None:
    """Its first app (memory://, in one process: correct) and the factory package it runs
    under gunicorn (its ``<!-- file: ... -->`` blocks, as tests/test_docs.py writes them)."""
    page = ROOT / "docs" / "tutorial.md"
    (tmp_path / "first_steps.py").write_text(_python_blocks(page)[0])
    files = [block for block in blocks_of(page) if block.mode == "file"]
    assert any(block.argument == "readinglist/__init__.py" for block in files)
    for block in files:
        (tmp_path / block.argument).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / block.argument).write_text(block.code)
    for module, tools in (("first_steps", ["add_book"]), ("readinglist", ["add_book", "search_books"])):
        report = start(module, tmp_path)
        assert report["tools"] == tools, module
        assert report["logged"] == [] and report["warned"] == [], module


def test_the_example_app_starts_without_a_warning(tmp_path: Path) -> None:
    report = start("example.app", ROOT, FLASK_MCP_BACKEND=f"sqlite:///{tmp_path / 'sessions.sqlite3'}")
    assert "search_books" in report["tools"]
    assert report["logged"] == [] and report["warned"] == []


# ---------------------------------------------------------------------- without the optional extras

#: A child interpreter in which PyYAML cannot be imported: a real "not installed" state
#: for every ``import yaml`` (None in sys.modules makes the import raise ImportError).
WITHOUT_YAML = "import sys; sys.modules['yaml'] = None\n"


def test_the_example_starts_without_the_skills_extra_and_says_once_what_it_left_out(tmp_path: Path) -> None:
    report = start("example.app", ROOT, prelude=WITHOUT_YAML,
                   FLASK_MCP_BACKEND=f"sqlite:///{tmp_path / 'sessions.sqlite3'}")
    assert "search_books" in report["tools"]
    assert report["warned"] == []
    assert report["logged"] == ["example.app WARNING: The bookshop-desk skill is left out: Reading a SKILL.md "
                                "needs PyYAML: pip install 'flask-mcp[skills]'"]


def test_flask_runs_the_example_without_the_skills_extra(tmp_path: Path) -> None:
    """``flask --app example.app ...``, the command line ``python3 dev.py example`` runs."""
    code = WITHOUT_YAML + "from flask.cli import main\nsys.argv = ['flask', '--app', 'example.app', 'mcp', 'list']\n"
    code += "main()\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=_child_environment(FLASK_MCP_BACKEND=f"sqlite:///{tmp_path / 'sessions.sqlite3'}"))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.strip()]  # Flask's default log format
    assert line.endswith("WARNING in app: The bookshop-desk skill is left out: Reading a SKILL.md needs PyYAML: "
                         "pip install 'flask-mcp[skills]'"), line
    assert "search_books" in done.stdout and "skill://bookshop-desk" not in done.stdout


def test_without_pyyaml_a_skill_folder_is_an_import_error_an_app_can_catch(tmp_path: Path) -> None:
    pytest.importorskip("yaml")  # the skill fixture is written as it would be with the extra
    (tmp_path / "desk").mkdir()
    (tmp_path / "desk" / "SKILL.md").write_text("---\nname: desk\ndescription: The desk runbook.\n---\n# Desk\n")
    code = WITHOUT_YAML + (
        "from flask import Flask\nfrom flask_mcp import MCP\n"
        "app = Flask('x'); app.config['MCP_BACKEND'] = 'memory://'\n"
        f"try:\n    MCP(app).skills_from_directory({str(tmp_path)!r})\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc.name, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=_child_environment())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ImportError yaml Reading a SKILL.md needs PyYAML: pip install 'flask-mcp[skills]'"
