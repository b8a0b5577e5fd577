"""The exceptions users meet: tool errors, protocol errors, HTTP errors.

Protocol errors (JSON-RPC codes) live in the sans-IO core and are re-exported
here; HTTP-level refusals are werkzeug ``HTTPException`` subclasses whose body
is a JSON-RPC error, so an app's own ``@app.errorhandler`` still applies.
"""

from __future__ import annotations

import json
from typing import Any

from werkzeug.exceptions import (
    Forbidden,
    HTTPException,
    MethodNotAllowed,
    NotAcceptable,
    RequestEntityTooLarge,
    UnsupportedMediaType,
)

from .protocol.errors import (
    ErrorCode,
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MCPError,
    MethodNotFound,
    MissingClientCapability,
    ParseError,
    ResourceNotFound,
    UnsupportedProtocolVersion,
)

__all__ = [
    "ErrorCode",
    "HeaderMismatch",
    "HostNotAllowed",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "MCPError",
    "MCPHTTPException",
    "MethodNotFound",
    "MissingClientCapability",
    "NotAcceptableMedia",
    "OriginNotAllowed",
    "ParseError",
    "PayloadTooLarge",
    "ResourceNotFound",
    "ToolError",
    "UnsupportedContentType",
    "UnsupportedProtocolVersion",
]


class ToolError(Exception):
    """Raise in a tool to answer with ``isError: true`` and this message.

    The message is shown to the model, so make it something it can act on.
    Any other exception becomes a generic error and is logged, never shown.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class MCPHTTPException(HTTPException):
    """An HTTP refusal whose body is a JSON-RPC error without an id."""

    jsonrpc_code: int = ErrorCode.INVALID_REQUEST

    def __init__(self, description: str, *, extra_headers: dict[str, str] | None = None) -> None:
        # By keyword: some werkzeug classes (MethodNotAllowed) take other arguments first.
        super().__init__(description=description)
        self.extra_headers = extra_headers or {}

    def get_body(self, environ: Any = None, scope: Any = None) -> str:
        return json.dumps(
            {"jsonrpc": "2.0", "error": {"code": int(self.jsonrpc_code), "message": self.description}}
        )

    def get_headers(self, environ: Any = None, scope: Any = None) -> list[tuple[str, str]]:
        return [("Content-Type", "application/json"), *self.extra_headers.items()]


class OriginNotAllowed(MCPHTTPException, Forbidden):
    """The ``Origin`` header names a site that may not call this endpoint."""


class HostNotAllowed(MCPHTTPException, Forbidden):
    """A server bound to loopback got a foreign ``Host`` (DNS rebinding)."""


class NotAcceptableMedia(MCPHTTPException, NotAcceptable):
    """The client accepts neither JSON nor an event stream."""


class UnsupportedContentType(MCPHTTPException, UnsupportedMediaType):
    """The POST body is not declared as JSON."""


class PayloadTooLarge(MCPHTTPException, RequestEntityTooLarge):
    """The body exceeds ``MCP_MAX_CONTENT_LENGTH``."""


class MethodNotAllowedHere(MCPHTTPException, MethodNotAllowed):
    """GET (no server-initiated stream), PUT, PATCH... on the MCP endpoint."""

    def __init__(self, description: str, allowed: tuple[str, ...] = ("POST", "DELETE")) -> None:
        super().__init__(description, extra_headers={"Allow": ", ".join(allowed)})

