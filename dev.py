#!/usr/bin/env python3
"""Set-up in one command, on a machine with only Python 3.11+.

    python3 dev.py example   # run the example MCP server on http://127.0.0.1:5000/mcp
    python3 dev.py test      # run the whole test suite (tox, against the built wheel) twice:
                             # on the oldest and on the newest supported Flask/Werkzeug,
                             # then the benchmark's own tests (bench/tests)

Both create ./.venv on first use and install what they need into it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")


def ensure_venv() -> None:
    stamp = VENV / ".flask-mcp-installed"
    wanted = (ROOT / "pyproject.toml").read_bytes()
    if stamp.exists() and stamp.read_bytes() == wanted:
        return
    if sys.version_info < (3, 11):
        sys.exit("flask-mcp needs Python 3.11 or newer")
    if not (BIN / "python").exists():
        venv.create(VENV, with_pip=True)
    pip = [str(BIN / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-e", f"{ROOT}[gunicorn]", "tox>=4"], check=True)
    stamp.write_bytes(wanted)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("example", "test"):
        print(__doc__)
        return 2
    ensure_venv()
    os.chdir(ROOT)
    if argv[0] == "example":
        cmd = [str(BIN / "flask"), "--app", "example.app", "run", "--port", "5000", *argv[1:]]
    else:
        # The conformance run is in py-flasklatest only (tox.ini), to keep CI short;
        # bench runs the benchmark's own tests (arguments go to the suite's runs).
        if argv[1:]:
            cmd = [str(BIN / "tox"), "run", "-e", "py-flaskoldest,py-flasklatest", "--", *argv[1:]]
        else:
            cmd = [str(BIN / "tox"), "run", "-e", "py-flaskoldest,py-flasklatest,bench"]
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
