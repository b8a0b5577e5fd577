"""JSON-RPC and MCP errors as types that know their wire form.

An error raised anywhere below the HTTP layer carries its JSON-RPC code, a
message a person can act on, optional ``data``, and (when the transport rules
fix it) the HTTP status that must accompany it.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class ErrorCode(IntEnum):
    """Every JSON-RPC error code this server emits, by name."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    RESOURCE_NOT_FOUND = -32002
    HEADER_MISMATCH = -32020
    MISSING_CLIENT_CAPABILITY = -32021
    UNSUPPORTED_PROTOCOL_VERSION = -32022


class MCPError(Exception):
    """A JSON-RPC error answer.

    ``http_status`` is ``None`` when the status follows from the era (the
    core decides), or a fixed status when the transport rules demand one.
    """

    code: int = ErrorCode.INTERNAL_ERROR
    http_status: int | None = None

    def __init__(
        self,
        message: str,
        *,
        data: Any = None,
        code: int | None = None,
        http_status: int | None = None,
        http_headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        #: Headers the HTTP answer must carry (``Retry-After``, ``WWW-Authenticate``).
        self.http_headers = dict(http_headers or {})
        if code is not None:
            self.code = code
        if http_status is not None:
            self.http_status = http_status

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member."""
        error: dict[str, Any] = {"code": int(self.code), "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(MCPError):
    code = ErrorCode.PARSE_ERROR
    http_status = 400


class InvalidRequest(MCPError):
    code = ErrorCode.INVALID_REQUEST
    http_status = 400


class MethodNotFound(MCPError):
    code = ErrorCode.METHOD_NOT_FOUND


class InvalidParams(MCPError):
    code = ErrorCode.INVALID_PARAMS


class InternalError(MCPError):
    code = ErrorCode.INTERNAL_ERROR


class ResourceNotFound(MCPError):
    code = ErrorCode.RESOURCE_NOT_FOUND


class HeaderMismatch(MCPError):
    """A 2026-07-28 standard header is missing, malformed or disagrees with the body."""

    code = ErrorCode.HEADER_MISMATCH
    http_status = 400


class MissingClientCapability(MCPError):
    """Serving the request needs a client capability the request did not declare."""

    code = ErrorCode.MISSING_CLIENT_CAPABILITY
    http_status = 400

    def __init__(self, required: dict[str, Any], message: str | None = None) -> None:
        names = ", ".join(sorted(required)) or "a capability"
        super().__init__(
            message or f"This request needs the client capability {names}; declare it in "
            "the request's io.modelcontextprotocol/clientCapabilities.",
            data={"requiredCapabilities": required},
        )
        self.required = required


class UnsupportedProtocolVersion(MCPError):
    code = ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    http_status = 400

    def __init__(self, requested: Any, supported: list[str]) -> None:
        super().__init__(
            f"Protocol version {requested!r} is not supported; use one of "
            f"{', '.join(supported)}.",
            data={"supported": supported, "requested": requested},
        )


class SessionRequired(MCPError):
    """A legacy request came without ``Mcp-Session-Id``."""

    code = ErrorCode.INVALID_REQUEST
    http_status = 400

    def __init__(self) -> None:
        super().__init__(
            "Missing Mcp-Session-Id header: send an initialize request first and "
            "repeat the Mcp-Session-Id it returns on every later request."
        )


class SessionNotFound(MCPError):
    """The named legacy session does not exist (never did, expired or ended)."""

    code = ErrorCode.INVALID_REQUEST
    http_status = 404

    def __init__(self) -> None:
        super().__init__(
            "Session not found: it expired or was ended. Start a new session "
            "with an initialize request (without Mcp-Session-Id)."
        )


class BadProtocolVersionHeader(MCPError):
    code = ErrorCode.INVALID_REQUEST
    http_status = 400
