"""Per-request metadata of the stateless 2026-07-28 revision (``params._meta``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import InvalidParams

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(slots=True)
class RequestMeta:
    """What a 2026-07-28 request says about itself and its client (built on
    every request: a frozen dataclass costs one ``object.__setattr__`` per field)."""

    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None
    progress_token: str | int | None


def parse_request_meta(params: dict[str, Any]) -> RequestMeta:
    """Validate the reserved ``_meta`` keys; a malformed request gets ``-32602``."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise _invalid("params._meta is required on every 2026-07-28 request")
    version = meta.get(PROTOCOL_VERSION_KEY)
    if not isinstance(version, str) or not version:
        raise _invalid(f"params._meta[{PROTOCOL_VERSION_KEY!r}] must be a version string")
    capabilities = meta.get(CLIENT_CAPABILITIES_KEY)
    if not isinstance(capabilities, dict):
        raise _invalid(
            f"params._meta[{CLIENT_CAPABILITIES_KEY!r}] is required (an object; {{}} declares none)"
        )
    client_info = meta.get(CLIENT_INFO_KEY)
    if client_info is not None and not isinstance(client_info, dict):
        raise _invalid(f"params._meta[{CLIENT_INFO_KEY!r}] must be an object when present")
    log_level = meta.get(LOG_LEVEL_KEY)
    if log_level is not None and log_level not in LOG_LEVELS:
        raise _invalid(f"params._meta[{LOG_LEVEL_KEY!r}] must be one of {', '.join(LOG_LEVELS)}")
    token = meta.get("progressToken")
    if token is not None and (
        isinstance(token, bool) or not isinstance(token, (str, int))
    ):
        raise _invalid("params._meta.progressToken must be a string or an integer")
    return RequestMeta(version, capabilities, client_info, log_level, token)


def _invalid(message: str) -> InvalidParams:
    return InvalidParams(message + ".", http_status=400)
