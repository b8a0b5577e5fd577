"""The per-call context a tool receives when it asks for one (a parameter
annotated ``Context``): who is calling, over which revision, with what."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .protocol.errors import MissingClientCapability
from .protocol.features import RequestInfo, log_level_reaches
from .protocol.meta import LOG_LEVELS
from .protocol.session import Session

logger = logging.getLogger("flask_mcp")


class Context:
    """Request information for tools and ``@mcp.instructions`` functions."""

    def __init__(self, request: RequestInfo) -> None:
        self._request = request
        self._last_progress: float | None = None

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

    # ------------------------------------------------------------------ notifications

    def log(self, level: str, data: Any, *, logger_name: str | None = None) -> None:
        """Send a log message to the client (``notifications/message``) if it asked
        for this level: a legacy session's ``logging/setLevel`` (default ``info``),
        or a 2026-07-28 request's ``_meta`` logLevel (no logs without it).

        ``data`` is any JSON value; never put secrets or personal data in it.
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"Unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        if not log_level_reaches(level, self._request.log_threshold):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger_name:
            params["logger"] = logger_name
        self._request.emit({"jsonrpc": "2.0", "method": "notifications/message", "params": params})

    def debug(self, data: Any) -> None:
        self.log("debug", data)

    def info(self, data: Any) -> None:
        self.log("info", data)

    def warning(self, data: Any) -> None:
        self.log("warning", data)

    def error(self, data: Any) -> None:
        self.log("error", data)

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Tell the client how far the call has got, if it asked (a ``progressToken``).

        ``progress`` must increase from one report to the next; a report that
        does not is dropped (and logged on the server).
        """
        token = self._request.progress_token
        if token is None:
            return
        if self._last_progress is not None and progress <= self._last_progress:
            logger.warning("Dropped a progress report that did not increase (%s after %s)",
                           progress, self._last_progress)
            return
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._request.emit({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
