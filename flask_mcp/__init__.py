"""flask-mcp: turn a Flask app into a Model Context Protocol server.

Public names are imported lazily, so that ``import flask_mcp.protocol`` (the
sans-IO core) never imports Flask.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .apps import CSP, sandbox_domain
    from .asking import ElicitResult
    from .completions import Completion
    from .content import (
        AssistantMessage,
        Audio,
        EmbeddedResource,
        Image,
        Message,
        ResourceContents,
        ResourceLink,
        Text,
        ToolResult,
        UserMessage,
    )
    from .context import Context, current_session
    from .errors import MCPError, ToolError
    from .extension import MCP
    from .protocol.versions import SUPPORTED_VERSIONS
    from .schema import Header

__all__ = [
    "CSP",
    "MCP",
    "SUPPORTED_VERSIONS",
    "AssistantMessage",
    "Audio",
    "Completion",
    "Context",
    "ElicitResult",
    "EmbeddedResource",
    "Header",
    "Image",
    "MCPError",
    "Message",
    "ResourceContents",
    "ResourceLink",
    "Text",
    "ToolError",
    "ToolResult",
    "UserMessage",
    "current_session",
    "sandbox_domain",
]

_WHERE = {
    "MCP": ".extension",
    "SUPPORTED_VERSIONS": ".protocol.versions",
    "Audio": ".content",
    "Context": ".context",
    "ElicitResult": ".asking",
    "current_session": ".context",
    "EmbeddedResource": ".content",
    "Header": ".schema",
    "Image": ".content",
    "MCPError": ".errors",
    "ResourceLink": ".content",
    "Text": ".content",
    "ToolError": ".errors",
    "ToolResult": ".content",
    "AssistantMessage": ".content",
    "Message": ".content",
    "ResourceContents": ".content",
    "UserMessage": ".content",
    "Completion": ".completions",
    "CSP": ".apps",
    "sandbox_domain": ".apps",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'flask_mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
