"""The per-call context a tool receives when it asks for one (a parameter
annotated ``Context``): who is calling, over which revision, with what."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .protocol.errors import MissingClientCapability
from .protocol.features import RequestInfo
from .protocol.session import Session


class Context:
    """Request information for tools and ``@mcp.instructions`` functions."""

    def __init__(self, request: RequestInfo) -> None:
        self._request = request

    @property
    def request_id(self) -> str | int | None:
        return self._request.request_id

    @property
    def method(self) -> str:
        return self._request.method

    @property
    def protocol_version(self) -> str:
        """The revision this request speaks, e.g. ``"2026-07-28"``."""
        return self._request.revision.version

    @property
    def stateless(self) -> bool:
        """True for 2026-07-28 requests (no session)."""
        return self._request.revision.stateless

    @property
    def client_info(self) -> dict[str, Any]:
        """The client's ``name``/``version`` (display only; do not branch on it)."""
        return dict(self._request.client_info or {})

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return dict(self._request.client_capabilities)

    @property
    def headers(self) -> Mapping[str, str]:
        """The HTTP request headers, keyed by lower-case name."""
        return self._request.headers

    @property
    def session(self) -> Session | None:
        """The legacy session, or ``None`` on the stateless revision."""
        return self._request.session

    @property
    def session_id(self) -> str | None:
        session = self._request.session
        return session.id if session else None

    @property
    def progress_token(self) -> str | int | None:
        return self._request.progress_token

    @property
    def meta(self) -> dict[str, Any]:
        """The request's ``params._meta`` as sent."""
        meta = self._request.params.get("_meta")
        return dict(meta) if isinstance(meta, dict) else {}

    def has_client_capability(self, name: str) -> bool:
        return name in self._request.client_capabilities

    def require_client_capability(self, **required: Any) -> None:
        """Stop unless the client declared these capabilities, e.g.
        ``ctx.require_client_capability(sampling={})``: a 2026-07-28 client gets
        ``-32021``, a legacy client an ``isError`` result."""
        missing = {k: v for k, v in required.items() if k not in self._request.client_capabilities}
        if missing:
            raise MissingClientCapability(missing)
