"""Notice ``FLASK_MCP_*`` variables the app never loaded.

Flask reads prefixed environment variables only when the app calls
``app.config.from_prefixed_env()``, and flask-mcp reads only ``app.config``.
A deployment that sets ``FLASK_MCP_BACKEND=redis://...`` for an app that
forgot that call would keep its sessions in SQLite without a word, so
``init_app`` names such variables in a warning instead. It does not load them
itself: whether and when the environment overrides the app's configuration
stays the app's decision, as everywhere else in Flask.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PREFIX = "FLASK_"


def unloaded_variables(environ: Mapping[str, str], config: Mapping[str, Any]) -> list[str]:
    """The ``FLASK_MCP_*`` variables whose key (as ``from_prefixed_env`` names
    it, ``FLASK_MCP_X__Y`` -> ``MCP_X``) is missing from ``config``."""
    found = []
    for name in sorted(environ):
        if not name.startswith(PREFIX + "MCP_"):
            continue
        key = name[len(PREFIX):].split("__", 1)[0]
        if key not in config:
            found.append(name)
    return found


def unloaded_warning(names: list[str]) -> str:
    return (
        f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} set in the environment, but app.config has "
        f"no such key, so flask-mcp ignores {'it' if len(names) == 1 else 'them'}. Flask loads prefixed "
        "variables only on request: call app.config.from_prefixed_env() before MCP(app) (or mcp.init_app(app))."
    )
