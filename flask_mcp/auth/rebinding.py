"""DNS-rebinding defence: the ``Host`` and ``Origin`` checks run before any
MCP processing (spec: servers MUST validate ``Origin``; a bad one gets 403)."""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit

from ..config import Settings
from ..errors import HostNotAllowed, OriginNotAllowed

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


@functools.lru_cache(maxsize=256)
def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hostname(host_header: str) -> str:
    """``Host`` without its port: ``[::1]:8000`` -> ``::1``, ``a.b:80`` -> ``a.b``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def check_host(server_name: str, host_header: str, settings: Settings) -> None:
    """A server listening on loopback answers only loopback host names (plus
    ``MCP_ALLOWED_HOSTS``): a foreign ``Host`` is a rebinding attack."""
    if not host_allowed(server_name, host_header, settings.allowed_hosts):
        raise host_refused(server_name, host_header)


def host_refused(server_name: str, host_header: str) -> HostNotAllowed:
    """:func:`check_host`'s refusal (for a caller that asked :func:`host_allowed` itself)."""
    return HostNotAllowed(
        f"Host {host_header!r} is not allowed for a server bound to {server_name}: "
        "add it to MCP_ALLOWED_HOSTS if it is yours."
    )


@functools.lru_cache(maxsize=256)
def host_allowed(server_name: str, host_header: str, allowed_hosts: tuple[str, ...]) -> bool:
    """:func:`check_host`'s decision, remembered: a server sees few distinct pairs."""
    if not is_loopback(server_name) or is_loopback(_hostname(host_header)):
        return True
    allowed = {h.lower() for h in allowed_hosts}
    return host_header.strip().lower() in allowed or _hostname(host_header) in allowed


def check_origin(origin: str | None, request_host: str, scheme: str, settings: Settings) -> None:
    """No ``Origin`` (non-browser clients), a loopback origin, our own HTTPS
    origin, or one in ``MCP_ALLOWED_ORIGINS`` may call; everything else is 403."""
    if origin is None:
        return
    allowed = settings.allowed_origins
    if callable(allowed):
        if allowed(origin):
            return
    elif origin.rstrip("/") in allowed:
        return
    parts = urlsplit(origin)
    if parts.scheme in ("http", "https") and parts.hostname and is_loopback(parts.hostname):
        return
    if scheme == "https" and origin.rstrip("/").lower() == f"https://{request_host}".lower():
        return
    raise OriginNotAllowed(
        f"Origin {origin!r} may not call this MCP endpoint: add it to MCP_ALLOWED_ORIGINS "
        "if it is a site you trust."
    )
