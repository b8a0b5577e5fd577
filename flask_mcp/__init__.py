"""flask-mcp: turn a Flask app into a Model Context Protocol server.

Public names are imported lazily, so that ``import flask_mcp.protocol`` (the
sans-IO core) never imports Flask. The modules that moved when the package
was grouped by concern still import from their old paths, with a warning.

The package's parts: ``protocol/`` (the sans-IO core), ``backends/`` (where
sessions, messages and tasks live), ``features/`` (what an app declares),
``auth/`` (who calls, and may they), ``http/`` (the WSGI views and streams),
``telemetry/``, ``tasks/`` (task runners) and ``cli/``; at the top, the
extension, the call's context (and its questions to the client), config,
errors, what runs an app's ``async def`` functions, testing and the gunicorn
settings. ``tests/test_import_graph.py``
says which part may import which.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .asking import ElicitResult
    from .context import Context, current_session
    from .errors import MCPError, ToolError
    from .extension import MCP
    from .features.apps import CSP, sandbox_domain
    from .features.completions import Completion
    from .features.content import (
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
    from .features.schema import Header
    from .protocol.versions import SUPPORTED_VERSIONS

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
    "Audio": ".features.content",
    "Context": ".context",
    "ElicitResult": ".asking",
    "current_session": ".context",
    "EmbeddedResource": ".features.content",
    "Header": ".features.schema",
    "Image": ".features.content",
    "MCPError": ".errors",
    "ResourceLink": ".features.content",
    "Text": ".features.content",
    "ToolError": ".errors",
    "ToolResult": ".features.content",
    "AssistantMessage": ".features.content",
    "Message": ".features.content",
    "ResourceContents": ".features.content",
    "UserMessage": ".features.content",
    "Completion": ".features.completions",
    "CSP": ".features.apps",
    "sandbox_domain": ".features.apps",
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


#: Modules that moved when the package was grouped by concern (old name under
#: ``flask_mcp.``: new name). Importing an old path gives the same module object
#: as the new one, with a :class:`DeprecationWarning`; the old paths go in 1.0.
MOVED_MODULES = {
    "accounts": "auth.accounts",
    "apps": "features.apps",
    "blueprint": "http.blueprint",
    "capacity": "http.capacity",
    "completions": "features.completions",
    "content": "features.content",
    "frontmatter": "features.skills.frontmatter",
    "gauges": "telemetry.gauges",
    "hardening": "auth.hardening",
    "held_response": "http.held_response",
    "json_response": "http.json_response",
    "jwks": "auth.jwks",
    "oauth": "auth.oauth",
    "options": "features.options",
    "otel": "telemetry.otel",
    "peer": "http.peer",
    "prompts": "features.prompts",
    "ratelimit": "auth.ratelimit",
    "registry": "features.registry",
    "resources": "features.resources",
    "resources_and_prompts": "features.resources_and_prompts",
    "schema": "features.schema",
    "security": "auth.rebinding",
    "skill_folders": "features.skills.folders",
    "skills": "features.skills.catalog",
    "skills_api": "features.skills.api",
    "sse": "http.sse",
    "streaming": "http.streaming",
    "task_celery": "tasks.celery",
    "task_threads": "tasks.threads",
    "telemetry_names": "telemetry.names",
    "tools": "features.tools",
    "uritemplate": "features.uritemplate",
    "verifiers": "auth.verifiers",
}


def moved_to(name: str) -> str | None:
    """Where the module once importable as ``name`` lives now (``None``: it did not move)."""
    if not name.startswith("flask_mcp."):
        return None
    old, _, rest = name[len("flask_mcp."):].partition(".")
    new = MOVED_MODULES.get(old)
    if new is None:
        return None
    return f"flask_mcp.{new}" + (f".{rest}" if rest else "")


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers imports of moved modules with the module at its new path. It sits
    first in ``sys.meta_path``: a submodule of a moved package (``flask_mcp.auth.oauth.store``)
    must not be found again, as a second copy, through the new package's path."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if moved_to(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        new = moved_to(spec.name)
        assert new is not None
        warnings.warn(f"{spec.name} has moved to {new}: import it from there (the old path goes in flask-mcp 1.0)",
                      DeprecationWarning, stacklevel=2)  # warnings skips importlib's frames
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is already imported."""


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())
