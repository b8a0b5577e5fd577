"""Every ``MCP_*`` configuration key, its default, and the frozen settings
object that ``init_app`` builds from them (validated once, at start-up)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: The configuration keys and their defaults. ``None`` means "derived".
DEFAULTS: dict[str, Any] = {
    "MCP_URL_PREFIX": "/mcp",
    "MCP_NAME": None,  # defaults to the Flask app's name
    "MCP_VERSION": None,  # defaults to "0.0.0"
    "MCP_INSTRUCTIONS": None,
    "MCP_BACKEND": "sqlite://",  # a file in the app's instance folder
    "MCP_SESSION_TIMEOUT": 3600,
    "MCP_MAX_CONTENT_LENGTH": 4 * 1024 * 1024,
    "MCP_PAGE_SIZE": 100,
    "MCP_DNS_REBINDING_PROTECTION": True,
    "MCP_ALLOWED_ORIGINS": (),
    "MCP_ALLOWED_HOSTS": (),
    "MCP_SSE_HEARTBEAT": 15,  # seconds between keep-alive comments on an idle stream
    "MCP_CLIENT_TIMEOUT": 300,  # seconds a tool waits for a legacy client's answer
    "MCP_CACHE_TTL_MS": 60_000,
    "MCP_CACHE_SCOPE": "public",
}

OriginCheck = Callable[[str], bool]


@dataclass(frozen=True)
class Settings:
    url_prefix: str
    name: str
    version: str
    instructions: str | None
    backend: Any
    session_timeout: float
    max_content_length: int
    page_size: int
    dns_rebinding_protection: bool
    allowed_origins: tuple[str, ...] | OriginCheck
    allowed_hosts: tuple[str, ...]
    cache_ttl_ms: int
    cache_scope: str
    sse_heartbeat: float
    client_timeout: float


class ConfigError(ValueError):
    """A bad ``MCP_*`` value; the message names the key and what to set."""


def load_settings(config: Mapping[str, Any], overrides: Mapping[str, Any], app_name: str) -> Settings:
    """Validate the app's ``MCP_*`` values (constructor arguments win)."""

    def value(key: str) -> Any:
        if overrides.get(key) is not None:
            return overrides[key]
        return config.get(key, DEFAULTS[key])

    prefix = _string(value("MCP_URL_PREFIX"), "MCP_URL_PREFIX")
    if not prefix.startswith("/") or (len(prefix) > 1 and prefix.endswith("/")):
        raise ConfigError(f"MCP_URL_PREFIX must start with '/' and not end with one (got {prefix!r})")
    scope = value("MCP_CACHE_SCOPE")
    if scope not in ("public", "private"):
        raise ConfigError(f"MCP_CACHE_SCOPE must be 'public' or 'private' (got {scope!r})")
    origins = value("MCP_ALLOWED_ORIGINS")
    return Settings(
        url_prefix=prefix,
        name=_string(value("MCP_NAME") or app_name, "MCP_NAME"),
        version=_string(value("MCP_VERSION") or "0.0.0", "MCP_VERSION"),
        instructions=value("MCP_INSTRUCTIONS"),
        backend=value("MCP_BACKEND"),
        session_timeout=_number(value("MCP_SESSION_TIMEOUT"), "MCP_SESSION_TIMEOUT", minimum=1),
        max_content_length=int(_number(value("MCP_MAX_CONTENT_LENGTH"), "MCP_MAX_CONTENT_LENGTH", minimum=1024)),
        page_size=int(_number(value("MCP_PAGE_SIZE"), "MCP_PAGE_SIZE", minimum=1)),
        dns_rebinding_protection=bool(value("MCP_DNS_REBINDING_PROTECTION")),
        allowed_origins=origins if callable(origins) else _strings(origins, "MCP_ALLOWED_ORIGINS"),
        allowed_hosts=_strings(value("MCP_ALLOWED_HOSTS"), "MCP_ALLOWED_HOSTS"),
        cache_ttl_ms=int(_number(value("MCP_CACHE_TTL_MS"), "MCP_CACHE_TTL_MS", minimum=0)),
        cache_scope=scope,
        sse_heartbeat=_number(value("MCP_SSE_HEARTBEAT"), "MCP_SSE_HEARTBEAT", minimum=0.05),
        client_timeout=_number(value("MCP_CLIENT_TIMEOUT"), "MCP_CLIENT_TIMEOUT", minimum=0.1),
    )


def _string(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key} must be a non-empty string (got {value!r})")
    return value


def _number(value: Any, key: str, *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ConfigError(f"{key} must be a number >= {minimum} (got {value!r})")
    return value


def _strings(value: Any, key: str) -> tuple[str, ...]:
    """A list of strings; a comma-separated string is accepted too (environment)."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, (list, tuple, set, frozenset)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of strings (got {value!r})")
    return tuple(value)
