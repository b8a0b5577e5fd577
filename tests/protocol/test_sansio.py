"""The protocol core is sans-IO: importing it never drags in Flask (design 1.1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WEB_PACKAGES = ("flask", "werkzeug", "jinja2", "click")


def _loaded_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; return the top-level modules it loaded."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    completed = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_importing_the_protocol_package_never_imports_flask() -> None:
    loaded = _loaded_after("import flask_mcp.protocol")
    assert "flask_mcp" in loaded
    assert "flask" not in loaded


def test_importing_the_protocol_package_imports_no_web_framework_at_all() -> None:
    loaded = _loaded_after("import flask_mcp.protocol")
    assert [name for name in WEB_PACKAGES if name in loaded] == []


def test_importing_every_protocol_submodule_never_imports_flask() -> None:
    code = (
        "import importlib, pkgutil, flask_mcp.protocol as p\n"
        "for info in pkgutil.iter_modules(p.__path__):\n"
        "    importlib.import_module('flask_mcp.protocol.' + info.name)\n"
    )
    loaded = _loaded_after(code)
    assert "flask" not in loaded
    assert "werkzeug" not in loaded


def test_the_protocol_core_can_answer_a_request_without_flask_loaded() -> None:
    code = (
        "from flask_mcp.protocol import Server, ServerInfo\n"
        "from flask_mcp.protocol.versions import REVISIONS\n"
        "class NoTools:\n"
        "    generation = 0\n"
        "    def definitions(self): return []\n"
        "    def find(self, name): return None\n"
        "class NoSessions:\n"
        "    def create(self, s): pass\n"
        "    def get(self, i): return None\n"
        "    def save(self, s): pass\n"
        "    def delete(self, i): return False\n"
        "server = Server(info=ServerInfo('t', '1'), tools=NoTools(), sessions=NoSessions())\n"
        'body = b\'{"jsonrpc":"2.0","id":1,"method":"initialize","params":'
        '{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}\'\n'
        "reply = server.handle_post({}, body)\n"
        "assert reply.status == 200, reply\n"
        "assert reply.body['result']['protocolVersion'] == '2025-11-25', reply.body\n"
    )
    loaded = _loaded_after(code)
    assert "flask" not in loaded


def test_importing_the_top_level_package_is_lazy_and_never_imports_flask() -> None:
    loaded = _loaded_after("import flask_mcp\nassert 'MCP' in dir(flask_mcp)")
    assert "flask" not in loaded
