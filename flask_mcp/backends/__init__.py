"""Where MCP sessions live. Each backend implements the small interfaces of
:mod:`flask_mcp.protocol.session`."""

from .memory import MemorySessionStore

__all__ = ["MemorySessionStore"]
