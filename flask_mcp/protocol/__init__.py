"""The sans-IO MCP protocol core: no Flask, no sockets, no files.

It parses and classifies JSON-RPC, chooses the revision of each request,
dispatches methods and shapes results per revision. ``flask_mcp.http.blueprint``
translates HTTP to and from it.

Imports no other part of flask_mcp (and neither Flask nor Werkzeug): every
other part may import it.
"""

from .errors import ErrorCode, MCPError
from .info import ProtocolOptions, ServerInfo
from .server import Server
from .transport import Reply
from .versions import LEGACY_VERSIONS, REVISIONS, STATELESS_VERSIONS, SUPPORTED_VERSIONS, Revision

__all__ = [
    "LEGACY_VERSIONS",
    "REVISIONS",
    "STATELESS_VERSIONS",
    "SUPPORTED_VERSIONS",
    "ErrorCode",
    "MCPError",
    "ProtocolOptions",
    "Reply",
    "Revision",
    "Server",
    "ServerInfo",
]
