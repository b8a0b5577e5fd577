"""Rate limits: ``MCP_RATE_LIMIT`` for every request to the MCP endpoint, and
``@mcp.tool(rate_limit=...)`` for single tools, each counted per caller (the
authenticated principal, else the remote address).

Counting uses Flask-Limiter's engine (the ``limits`` package): a fixed-window
counter in ``MCP_RATE_LIMIT_STORAGE`` when it is set; else the app's own
``Limiter`` (its strategy and storage) when the app has one; else a
fixed-window counter in the session backend's Redis (or Redis Cluster, or
SQL database: a session store that offers ``rate_limit_storage()``), else
in memory. Over the limit -> ``429`` with ``Retry-After``
and a JSON-RPC error body. If the counter's storage fails, requests are let
through (one log line a minute): rate limits protect, they should not take
the service down.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Flask, current_app, has_request_context, request
from werkzeug.exceptions import TooManyRequests

from ..backends import Backend
from ..config import Settings
from ..protocol.errors import ErrorCode, MCPError
from ..protocol.request_info import RequestInfo
from .bearer import DetailedRefusal
from .tokens import Principal

logger = logging.getLogger("flask_mcp")

NAMESPACE = "flask-mcp"
STORAGE_KEY_PREFIX = "flask-mcp-ratelimit"


class RateLimited(DetailedRefusal, TooManyRequests):
    """Too many requests to the endpoint: 429 with ``Retry-After``."""


class ToolRateLimited(MCPError):
    """Too many calls of one tool: 429 with ``Retry-After`` (a JSON-RPC error with the request's id)."""

    code = ErrorCode.INVALID_REQUEST
    http_status = 429


def parse_limit(text: str, where: str) -> tuple[Any, ...]:
    """``"10/minute"``, ``"100 per hour; 10 per minute"``... as ``limits`` items.
    Raises ``ValueError`` naming ``where`` (a config key or a tool)."""
    try:
        from limits import parse_many
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"{where}: rate limits need Flask-Limiter: pip install flask-mcp[ratelimit]") from exc
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where}: a rate limit is a string such as '10/minute' (got {text!r})")
    try:
        return tuple(parse_many(text))
    except ValueError:
        raise ValueError(
            f"{where}: invalid rate limit {text!r}; write e.g. '10/minute' or '100 per hour; 10 per minute'"
        ) from None


def app_limiter(app: Flask) -> Any:
    """The app's Flask-Limiter ``Limiter``, if it has one (``app.extensions["limiter"]``
    is a set of them in Flask-Limiter 3+, a single one before)."""
    found = app.extensions.get("limiter")
    if isinstance(found, (set, frozenset, list, tuple)):
        found = next(iter(found), None)
    return found if found is not None and hasattr(found, "limiter") else None


def _identity(auth: Any) -> str:
    if isinstance(auth, Principal):
        return "principal:" + auth.subject
    address = request.remote_addr if has_request_context() else None
    return "address:" + (address or "unknown")


class RateLimits:
    """The endpoint's and the tools' limits of one app."""

    def __init__(self, settings: Settings, backend: Backend, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.backend = backend
        self.clock = clock
        self.endpoint_limits = parse_limit(settings.rate_limit, "MCP_RATE_LIMIT") if settings.rate_limit else ()
        self.description = "not used yet"
        self._strategy: Callable[[], Any] | None = None
        self._lock = threading.Lock()
        self._last_warning = -math.inf

    def install(self, app: Flask, blueprint: Blueprint) -> None:
        """With its own endpoint limit, the MCP blueprint leaves the app limiter's
        default limits (its application-wide limits still apply)."""
        shared = app_limiter(app)
        if shared is not None and self.endpoint_limits and not self.settings.rate_limit_storage:
            from flask_limiter import ExemptionScope

            shared.exempt(blueprint, flags=ExemptionScope.DEFAULT)

    # ------------------------------------------------------------------ counting

    def hit_endpoint(self, principal: Principal | None) -> None:
        """Count one request to the endpoint (raises the 429 answer)."""
        if not self.endpoint_limits:
            return
        hit = self._hit(self.endpoint_limits, "endpoint", _identity(principal))
        if hit is not None:
            item, retry = hit
            raise RateLimited(
                f"Rate limit exceeded: at most {item} for this caller; retry in {retry} s.",
                data={"retryAfter": retry, "limit": str(item)},
                extra_headers={"Retry-After": str(retry)},
            )

    def hit_tool(self, name: str, limits: tuple[Any, ...], request_info: RequestInfo) -> None:
        """Count one call of tool ``name`` (raises the 429 JSON-RPC error)."""
        hit = self._hit(limits, "tool", name, _identity(request_info.auth))
        if hit is not None:
            item, retry = hit
            raise ToolRateLimited(
                f"Tool {name!r} may be called at most {item} by this caller; retry in {retry} s.",
                data={"retryAfter": retry, "limit": str(item)},
                http_headers={"Retry-After": str(retry)},
            )

    def _hit(self, items: tuple[Any, ...], *identifiers: str) -> tuple[Any, int] | None:
        """The first limit exceeded and the seconds until it resets, or ``None``."""
        try:
            strategy = self.strategy()
            for item in items:
                if not strategy.hit(item, NAMESPACE, *identifiers):
                    reset = strategy.get_window_stats(item, NAMESPACE, *identifiers).reset_time
                    return item, max(1, math.ceil(reset - self.clock()))
        except Exception as exc:  # the counter's storage failed: let the request through
            now = time.monotonic()
            if now - self._last_warning > 60:
                self._last_warning = now
                logger.warning("Rate limits not enforced: their storage (%s) failed: %s",
                               self.description, type(exc).__name__)
        return None

    # ------------------------------------------------------------------ where counts live

    def strategy(self) -> Any:
        """The ``limits`` strategy that counts (built on first use)."""
        if self._strategy is None:
            with self._lock:
                if self._strategy is None:
                    self._strategy = self._choose()
        return self._strategy()

    def _choose(self) -> Callable[[], Any]:
        shared = None if self.settings.rate_limit_storage else app_limiter(current_app)
        if shared is not None:
            self.description = "the app's Flask-Limiter"
            return lambda: shared.limiter  # looked up each time: it may switch to its fallback
        from limits.storage import storage_from_string
        from limits.strategies import FixedWindowRateLimiter

        uri = self.settings.rate_limit_storage
        options: dict[str, Any] = {"wrap_exceptions": True}
        client: Any = getattr(self.backend.sessions, "client", None)
        on_redis = uri is None and client is not None and self.backend.describe().startswith("redis")
        shared_storage = getattr(self.backend.sessions, "rate_limit_storage", None)
        if uri is None and callable(shared_storage):
            self.description = f"the session backend's {self.backend.describe()}"
            shared_strategy = FixedWindowRateLimiter(shared_storage())
            return lambda: shared_strategy
        if on_redis and client.connection_pool is None:
            from ..backends.redis_cluster import rate_limit_storage  # a cluster: no single pool to share

            self.description = f"the session backend's {self.backend.describe()}"
            cluster_strategy = FixedWindowRateLimiter(rate_limit_storage(client, STORAGE_KEY_PREFIX))
            return lambda: cluster_strategy
        if on_redis:
            uri = "redis://"
            options.update(connection_pool=client.connection_pool, key_prefix=STORAGE_KEY_PREFIX)
            self.description = f"the session backend's {self.backend.describe()}"
        elif uri is None:
            uri = "memory://"
            self.description = "memory (this process)"
        else:
            self.description = uri.split("://", 1)[0] + "://"
        strategy = FixedWindowRateLimiter(storage_from_string(uri, **options))
        return lambda: strategy
