#!/usr/bin/env python3
"""Set-up in one command, on a machine with only Python 3.11+.

    python3 dev.py example   # run the example MCP server on http://127.0.0.1:5000/mcp
    python3 dev.py test      # run the whole test suite (tox, against the built wheel) twice:
                             # on the oldest and on the newest supported Flask/Werkzeug,
                             # then the benchmark's own tests (bench/tests), the
                             # documentation site (sphinx -W), the sdist and wheel
                             # (built, then twine check --strict), mypy and ruff

Both create ./.venv on first use and install what they need into it. Further
arguments go to the command: `python3 dev.py example --port 5001` (or set
FLASK_RUN_PORT), `python3 dev.py test -k tools -x`.

Once .venv is ready, this process becomes the server (or tox): a signal sent to
its PID, e.g. SIGTERM from a supervisor, reaches the server itself.
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


EXTRAS = "fast,gunicorn,skills"  # the README's install line, plus skills for the example's runbook


def ensure_venv() -> None:
    stamp = VENV / ".flask-mcp-installed"
    wanted = (ROOT / "pyproject.toml").read_bytes() + EXTRAS.encode()
    if stamp.exists() and stamp.read_bytes() == wanted:
        return
    if sys.version_info < (3, 11):
        sys.exit("flask-mcp needs Python 3.11 or newer")
    if not (BIN / "python").exists():
        venv.create(VENV, with_pip=True)
    pip = [str(BIN / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "-e", f"{ROOT}[{EXTRAS}]", "tox>=4"], check=True)
    stamp.write_bytes(wanted)


def become(cmd: list[str], env: dict[str, str]) -> int:
    """Replace this process by ``cmd`` (same PID, so signals reach it)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "nt":  # no exec on Windows: wait for the child instead
        return subprocess.call(cmd, env=env)
    os.execve(cmd[0], cmd, env)
    raise AssertionError("unreachable")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("example", "test"):
        print(__doc__)
        return 2
    ensure_venv()
    os.chdir(ROOT)
    env = dict(os.environ)
    if argv[0] == "example":
        env.setdefault("FLASK_RUN_PORT", "5000")
        cmd = [str(BIN / "flask"), "--app", "example.app", "run", *argv[1:]]
    else:
        # The whole suite on the oldest and on the newest supported Flask/Werkzeug side by
        # side (the conformance run and the deployment tests in the newest only, tox.ini:
        # nothing of the oldest's uses Celery's queue on Redis, ports are free ones), then,
        # as a slot frees, the benchmark's own tests, the documentation site (-W), the package
        # (sdist and wheel, twine check --strict), mypy and ruff. One after the other they
        # took 30 minutes; side by side the newest run's end-to-end tests, which mostly
        # wait, leave the oldest's unit tests a core. Arguments go to the suite's two runs only.
        if argv[1:]:
            cmd = [str(BIN / "tox"), "run", "-e", "py-flaskoldest,py-flasklatest", "--", *argv[1:]]
        else:
            cmd = [str(BIN / "tox"), "run-parallel", "--parallel", "2", "--parallel-live", "--parallel-no-spinner",
                   "-e", "py-flaskoldest,py-flasklatest,bench,docs,package,typing,style"]
    return become(cmd, env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
