"""The per-app state ``init_app`` builds and keeps in ``app.extensions["mcp"]``:
what the views serve an app with (the core, the backend, the authenticator,
rate limits, telemetry, stream slots), and what the command line reads. The
extension object is seen through a protocol, so that nothing here imports
``extension.py``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from ..auth.bearer import Authenticator
from ..auth.ratelimit import RateLimits
from ..backends import Backend
from ..config import Settings
from ..protocol.server import Server
from ..protocol.session import SessionStore
from ..telemetry.gauges import OpenStreams
from ..telemetry.observer import Telemetry
from .capacity import StreamSlots
from .streaming import StreamOptions


class Extension(Protocol):
    """What the state reads of the :class:`~flask_mcp.MCP` object that built it."""

    @property
    def config_overrides(self) -> Mapping[str, Any]:
        """The keyword arguments that beat the app's ``MCP_*`` configuration."""
        ...

    def declared_scopes(self) -> tuple[str, ...]:
        """Every scope a registered tool, resource, prompt or skill asks for."""
        ...


@dataclass(frozen=True)
class MCPState:
    """Per-app state, kept in ``app.extensions["mcp"]``."""

    extension: Extension
    settings: Settings
    server: Server
    backend: Backend
    authenticator: Authenticator | None = None
    rate_limits: RateLimits | None = None
    #: Spans, metrics and the access log (``None`` with ``MCP_TELEMETRY = False``).
    telemetry: Telemetry | None = None
    #: What init_app warned it ignores (unknown ``MCP_*`` keys, unloaded ``FLASK_MCP_*``
    #: variables), for ``flask mcp check`` to report again.
    ignored_settings: tuple[str, ...] = ()

    @property
    def sessions(self) -> SessionStore:
        return self.backend.sessions

    @cached_property
    def checks_callers(self) -> bool:
        """Whether a request's caller must be authenticated or counted (most
        apps do neither, and then the views skip the step)."""
        auth = self.authenticator is not None and bool(self.settings.auth)
        return auth or (self.rate_limits is not None and bool(self.rate_limits.endpoint_limits))

    @cached_property
    def stream_options(self) -> StreamOptions:
        settings = self.settings
        return StreamOptions(settings.sse_heartbeat, settings.sse_retry_ms, settings.sse_poll_after,
                             settings.sse_probe_interval)

    @cached_property
    def open_streams(self) -> OpenStreams:
        """The event-stream responses this worker is sending (an operator gauge)."""
        return OpenStreams()

    @cached_property
    def stream_slots(self) -> StreamSlots:
        """The long-lived streams this worker holds, against its share of threads."""
        return StreamSlots(self.settings.stream_share, self.settings.worker_threads)
