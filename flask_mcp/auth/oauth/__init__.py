"""The app as its own OAuth 2.1 authorization server (``pip install
flask-mcp[oauth]``, ``MCP_OAUTH = True``): remote MCP hosts connect with the
app's own sign-in. See docs/oauth.md."""

from __future__ import annotations

from typing import Any

from flask import Flask

from .clients import Client, ClientRejected
from .store import CodeRecord, Connection, OAuthStore, TokenRecord

__all__ = ["Client", "ClientRejected", "CodeRecord", "Connection", "OAuthServer", "OAuthStore", "TokenRecord",
           "oauth_server"]


def __getattr__(name: str) -> Any:
    if name == "OAuthServer":  # authlib is imported only when the server is used
        from .server import OAuthServer

        return OAuthServer
    raise AttributeError(name)


def oauth_server(app: Flask) -> Any:
    """The app's :class:`~flask_mcp.auth.oauth.server.OAuthServer` (for ``connections`` and ``revoke_client``)."""
    return app.extensions["mcp_oauth"]
