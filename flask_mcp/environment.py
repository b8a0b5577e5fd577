"""What a deployment set that flask-mcp would ignore: ``MCP_*`` keys it does
not read (``MCP_SESION_TIMEOUT``) and ``FLASK_MCP_*`` variables the app never
loaded.

Flask reads prefixed environment variables only when the app calls
``app.config.from_prefixed_env()``, and flask-mcp reads only ``app.config``.
A deployment that sets ``FLASK_MCP_BACKEND=redis://...`` for an app that
forgot that call would keep its sessions in SQLite without a word, so
``init_app`` names such variables in a warning instead (or, with
``MCP_STRICT_CONFIG``, refuses to start). It does not load them itself:
whether and when the environment overrides the app's configuration stays the
app's decision, as everywhere else in Flask. ``flask mcp check`` reports the
same findings, with the same did-you-mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import KEYS, did_you_mean, unknown_key_message, unknown_keys

PREFIX = "FLASK_"


def ignored_settings(environ: Mapping[str, str], config: Mapping[str, Any]) -> list[str]:
    """One message per thing flask-mcp will ignore; read before ``init_app``
    writes the defaults into ``config`` (after that every known key is there)."""
    messages = [unknown_key_message(key) for key in unknown_keys(config)]
    unloaded = unloaded_variables(environ, config)
    known = [name for name in unloaded if _key_of(name) in KEYS]
    if known:
        messages.append(unloaded_warning(known))
    for name in unloaded:
        if name not in known:
            messages.append(f"{name} is set in the environment, but {_key_of(name)} is not a flask-mcp setting"
                            f"{did_you_mean(_key_of(name), PREFIX)}")
    return messages


def unloaded_variables(environ: Mapping[str, str], config: Mapping[str, Any]) -> list[str]:
    """The ``FLASK_MCP_*`` variables whose key (as ``from_prefixed_env`` names
    it, ``FLASK_MCP_X__Y`` -> ``MCP_X``) is missing from ``config``."""
    return [name for name in sorted(environ) if name.startswith(PREFIX + "MCP_") and _key_of(name) not in config]


def _key_of(name: str) -> str:
    return name[len(PREFIX):].split("__", 1)[0]


def unloaded_warning(names: list[str]) -> str:
    return (
        f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} set in the environment, but app.config has "
        f"no such key, so flask-mcp ignores {'it' if len(names) == 1 else 'them'}. Flask loads prefixed "
        "variables only on request: call app.config.from_prefixed_env() before MCP(app) (or mcp.init_app(app))."
    )
