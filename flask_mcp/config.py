"""Every ``MCP_*`` configuration key, its default, and the frozen settings
object that ``init_app`` builds from them (validated once, at start-up).

The keys are defined here and nowhere else: the configuration reference
(docs/configuration.md) is generated from these tables, comments included,
and a key the package reads that is missing here fails tests/test_config.py.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

#: The configuration keys and their defaults. ``None`` means "derived".
DEFAULTS: dict[str, Any] = {
    "MCP_URL_PREFIX": "/mcp",  # where the endpoints live
    "MCP_NAME": None,  # defaults to the Flask app's name
    "MCP_VERSION": None,  # defaults to "0.0.0"
    "MCP_INSTRUCTIONS": None,  # static instructions (per request: @mcp.instructions)
    "MCP_BACKEND": "sqlite://",  # a file in the instance folder; or redis://..., postgresql://..., the app's db
    "MCP_SESSION_TIMEOUT": 3600,  # seconds a legacy session may stay idle
    "MCP_MAX_CONTENT_LENGTH": 4 * 1024 * 1024,  # bytes; larger request bodies get 413
    "MCP_PAGE_SIZE": 100,  # items per list page (opaque cursors)
    "MCP_DNS_REBINDING_PROTECTION": True,  # the Host and Origin checks
    "MCP_ALLOWED_ORIGINS": (),  # extra browser origins allowed (a list, or a callable)
    "MCP_ALLOWED_HOSTS": (),  # extra Host names for a server bound to loopback
    "MCP_SSE_HEARTBEAT": 15,  # seconds between keep-alive comments on an idle stream
    # Seconds between checks that an idle stream's client is still connected: a
    # client that left frees its thread within this (docs/streams.md).
    "MCP_SSE_PROBE_INTERVAL": 0.5,  # seconds between checks that an idle stream's client is still there
    # The share of a worker's threads that long-lived streams (subscriptions/listen,
    # resumed streams) may hold; past it, new ones get 503. The thread count is
    # MCP_WORKER_THREADS, else gunicorn's (None and outside gunicorn: no limit).
    "MCP_STREAM_SHARE": 0.5,  # share of a worker's threads long-lived streams may hold (past it: 503)
    "MCP_WORKER_THREADS": None,  # a worker's thread count (None: gunicorn's; outside gunicorn, no limit)
    "MCP_CLIENT_TIMEOUT": 300,  # seconds a tool waits for a legacy client's answer
    # Resumable streams (2025-11-25 sessions): the client's reconnection delay, how
    # long a stream's events are kept for a GET with Last-Event-ID, and after how
    # many seconds the server lets a long stream's connection go (None: never).
    "MCP_SSE_RETRY_MS": 1000,  # the reconnection delay sent on resumable streams
    "MCP_SSE_RETENTION": 600,  # seconds a resumable stream's events are kept after its last one
    "MCP_SSE_POLL_AFTER": None,  # let a resumable stream's connection go after this many seconds
    "MCP_CACHE_TTL_MS": 60_000,  # 2026-07-28 caching hint: ttlMs of discover, list and read results
    "MCP_CACHE_SCOPE": "public",  # 2026-07-28 caching hint: cacheScope, "public" or "private"
    # Authentication, rate limits, hardening (docs/authentication.md, docs/deploying.md).
    "MCP_AUTH": False,  # require bearer tokens (and serve the protected-resource metadata)
    "MCP_TOKEN_VERIFIER": None,  # "presence", "introspection", "jwt", an object or a function
    "MCP_AUTH_SERVERS": (),  # authorization server issuer URLs, for the metadata document
    "MCP_AUTH_SCOPES": (),  # scopes_supported (default: the scopes the tools declare)
    "MCP_RESOURCE_URL": None,  # the endpoint's canonical URL (default: from the request)
    "MCP_AUTH_AUDIENCE": None,  # the audience tokens must name (default: MCP_RESOURCE_URL)
    "MCP_INTROSPECTION_URL": None,  # the RFC 7662 introspection endpoint
    "MCP_INTROSPECTION_CLIENT_ID": None,  # credentials for the introspection endpoint
    "MCP_INTROSPECTION_CLIENT_SECRET": None,  # (never shown in repr)
    "MCP_JWKS_URL": None,  # where the JWT verifier fetches the signing keys
    "MCP_JWT_ISSUER": None,  # the iss tokens must carry (None: not checked)
    "MCP_JWT_ALGORITHMS": ("RS256", "ES256"),  # signature algorithms accepted
    "MCP_AUTH_CACHE_TTL": 60,  # seconds an introspection answer is reused
    "MCP_AUTH_TIMEOUT": 5,  # seconds a call to the authorization server may take
    "MCP_ACCOUNT_HEADER": "X-Account-Id",  # where ctx.account may come from
    "MCP_RATE_LIMIT": None,  # e.g. "120/minute", per principal (or remote address)
    "MCP_RATE_LIMIT_STORAGE": None,  # a limits storage URI (default: the app's Limiter, Redis, memory)
    "MCP_CORS_ORIGINS": (),  # browser origins given the CORS preset ("*": any)
    "MCP_MAX_JSON_DEPTH": 64,  # deeper request bodies get 400
    "MCP_MAX_CLIENT_INFO_BYTES": 64 * 1024,  # an initialize's clientInfo + capabilities a session keeps (JSON)
    # Tasks (the io.modelcontextprotocol/tasks extension): how long a task is kept
    # after its creation (seconds; None: until the backend drops it) and the poll
    # interval suggested to clients (milliseconds).
    "MCP_TASK_TTL": 3600,  # seconds a task is kept after its creation (None: until the backend drops it)
    "MCP_TASK_POLL_INTERVAL_MS": 1000,  # the pollIntervalMs suggested to clients polling a task
    "MCP_TASK_MAX_RUNNING": 64,  # task tools running at once per worker process (None: no limit)
    "MCP_TASK_RUNNER": "thread",  # where task tools run: "thread" (the web worker) or "celery" (docs/celery.md)
    # Skills (the io.modelcontextprotocol/skills extension): also answer
    # resources/directory/read, declared as directoryRead (docs/skills.md).
    "MCP_SKILLS_DIRECTORY_READ": False,  # answer resources/directory/read for skill folders (directoryRead)
    "MCP_TELEMETRY": True,  # OpenTelemetry spans and metrics, and the flask_mcp.access log (docs/observability.md)
    "MCP_STRICT_CONFIG": False,  # ConfigError, not a warning, for unknown MCP_* keys and unloaded FLASK_MCP_* vars
}

#: The app as its own authorization server (``MCP_OAUTH``, docs/oauth.md). Read
#: from ``app.config`` by ``flask_mcp/auth/oauth/`` when ``MCP_OAUTH`` is on, so
#: they are not fields of :class:`Settings`.
OAUTH_DEFAULTS: dict[str, Any] = {
    "MCP_OAUTH": False,  # turn the authorization server on (needs MCP_AUTH = True and flask-mcp[oauth])
    "MCP_OAUTH_STORE": "sqlite://",  # where codes and tokens live: "sqlite://[/path]", Redis or PostgreSQL, an object
    "MCP_OAUTH_STORE_PREFIX": "flask-mcp:oauth:",  # the Redis key prefix of a Redis store
    "MCP_OAUTH_ISSUER": None,  # the issuer URL (None: the request's root URL; set it behind a proxy)
    "MCP_OAUTH_CURRENT_USER": None,  # a function returning the signed-in user's id or None (None: Flask-Login's)
    "MCP_OAUTH_LOGIN_URL": None,  # where to send a visitor who is not signed in (None: Flask-Login's login_view)
    "MCP_OAUTH_CONSENT_TEMPLATE": "mcp_oauth/consent.html",  # the template of the consent page
    "MCP_OAUTH_CONNECTIONS_TEMPLATE": "mcp_oauth/connections.html",  # the template of the connected-apps page
    "MCP_OAUTH_ACCESS_TOKEN_TTL": 3600,  # seconds an access token lives
    "MCP_OAUTH_REFRESH_TOKEN_TTL": 30 * 24 * 3600,  # seconds a refresh token lives (30 days)
    "MCP_OAUTH_CODE_TTL": 60,  # seconds an authorization code lives
    "MCP_OAUTH_CIMD_TIMEOUT": 5,  # seconds to fetch a Client ID Metadata Document or a logo (the whole fetch)
    "MCP_OAUTH_CIMD_MAX_FETCHES": 2,  # documents and logos fetched at once per process (beyond: 503 at once)
    "MCP_OAUTH_CIMD_CACHE_TTL": 300,  # seconds a fetched metadata document is reused
    "MCP_OAUTH_CIMD_CA_BUNDLE": None,  # CA bundle for metadata documents (None: REQUESTS_CA_BUNDLE, else certifi's)
    "MCP_OAUTH_CIMD_ALLOW_LOOPBACK": False,  # tests only: accept metadata documents on 127.0.0.1 / ::1
    "MCP_OAUTH_DYNAMIC_REGISTRATION": False,  # also accept RFC 7591 registrations at /oauth/register
    "MCP_OAUTH_SCOPE_DESCRIPTIONS": {},  # scope -> what the consent page says it lets an app do ("Read your notes")
    "MCP_OAUTH_SIGN_OUT": None,  # a function signing the user out, for "Not you?" (None: Flask-Login's logout_user)
}

#: Every key flask-mcp reads, with its default: what ``init_app`` writes into
#: ``app.config`` (``setdefault``) and what an ``MCP_*`` key is checked against.
KEYS: dict[str, Any] = {**DEFAULTS, **OAUTH_DEFAULTS}

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
    sse_probe_interval: float
    stream_share: float
    worker_threads: int | None
    client_timeout: float
    sse_retry_ms: int
    sse_retention: float
    sse_poll_after: float | None
    auth: bool
    token_verifier: Any
    auth_servers: tuple[str, ...]
    auth_scopes: tuple[str, ...]
    resource_url: str | None
    auth_audience: str | None
    introspection_url: str | None
    introspection_client_id: str | None
    introspection_client_secret: str | None = field(repr=False)
    jwks_url: str | None
    jwt_issuer: str | None
    jwt_algorithms: tuple[str, ...]
    auth_cache_ttl: float
    auth_timeout: float
    account_header: str
    rate_limit: str | None
    rate_limit_storage: str | None
    cors_origins: tuple[str, ...]
    max_json_depth: int
    max_client_info_bytes: int = 64 * 1024
    task_ttl: float | None = 3600.0
    task_poll_interval_ms: int = 1000
    task_max_running: int | None = 64
    task_runner: str = "thread"
    skills_directory_read: bool = False
    telemetry: bool = True
    strict_config: bool = False


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
    runner = value("MCP_TASK_RUNNER")
    if runner not in ("thread", "celery"):
        raise ConfigError(f"MCP_TASK_RUNNER must be 'thread' or 'celery' (got {runner!r})")
    return Settings(
        url_prefix=prefix,
        name=_string(value("MCP_NAME") or app_name, "MCP_NAME"),
        version=_string(value("MCP_VERSION") or "0.0.0", "MCP_VERSION"),
        instructions=_instructions(value("MCP_INSTRUCTIONS")),
        backend=value("MCP_BACKEND"),
        session_timeout=_number(value("MCP_SESSION_TIMEOUT"), "MCP_SESSION_TIMEOUT", minimum=1),
        max_content_length=int(_number(value("MCP_MAX_CONTENT_LENGTH"), "MCP_MAX_CONTENT_LENGTH", minimum=1024)),
        page_size=int(_number(value("MCP_PAGE_SIZE"), "MCP_PAGE_SIZE", minimum=1)),
        dns_rebinding_protection=_flag(value("MCP_DNS_REBINDING_PROTECTION"), "MCP_DNS_REBINDING_PROTECTION"),
        allowed_origins=_with_cors(origins if callable(origins) else _strings(origins, "MCP_ALLOWED_ORIGINS"),
                                   _strings(value("MCP_CORS_ORIGINS"), "MCP_CORS_ORIGINS")),
        allowed_hosts=_strings(value("MCP_ALLOWED_HOSTS"), "MCP_ALLOWED_HOSTS"),
        cache_ttl_ms=int(_number(value("MCP_CACHE_TTL_MS"), "MCP_CACHE_TTL_MS", minimum=0)),
        cache_scope=scope,
        sse_heartbeat=_number(value("MCP_SSE_HEARTBEAT"), "MCP_SSE_HEARTBEAT", minimum=0.05),
        sse_probe_interval=_number(value("MCP_SSE_PROBE_INTERVAL"), "MCP_SSE_PROBE_INTERVAL", minimum=0.05),
        stream_share=_share(value("MCP_STREAM_SHARE"), "MCP_STREAM_SHARE"),
        worker_threads=_optional_int(value("MCP_WORKER_THREADS"), "MCP_WORKER_THREADS"),
        client_timeout=_number(value("MCP_CLIENT_TIMEOUT"), "MCP_CLIENT_TIMEOUT", minimum=0.1),
        sse_retry_ms=int(_number(value("MCP_SSE_RETRY_MS"), "MCP_SSE_RETRY_MS", minimum=0)),
        sse_retention=_number(value("MCP_SSE_RETENTION"), "MCP_SSE_RETENTION", minimum=1),
        sse_poll_after=_optional_number(value("MCP_SSE_POLL_AFTER"), "MCP_SSE_POLL_AFTER", minimum=0.05),
        task_ttl=_optional_number(value("MCP_TASK_TTL"), "MCP_TASK_TTL", minimum=1),
        task_poll_interval_ms=int(_number(value("MCP_TASK_POLL_INTERVAL_MS"), "MCP_TASK_POLL_INTERVAL_MS", minimum=1)),
        task_max_running=_optional_int(value("MCP_TASK_MAX_RUNNING"), "MCP_TASK_MAX_RUNNING"),
        task_runner=runner,
        skills_directory_read=_flag(value("MCP_SKILLS_DIRECTORY_READ"), "MCP_SKILLS_DIRECTORY_READ"),
        telemetry=_flag(value("MCP_TELEMETRY"), "MCP_TELEMETRY"),
        strict_config=_flag(value("MCP_STRICT_CONFIG"), "MCP_STRICT_CONFIG"),
        **_security_settings(value),
    )


def did_you_mean(key: str, prefix: str = "") -> str:
    """`` (did you mean MCP_PAGE_SIZE?)`` for a key close to one flask-mcp reads
    (``prefix`` before the suggestion: ``FLASK_`` for a variable), else ``""``."""
    close = difflib.get_close_matches(key, KEYS, n=1)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""


def unknown_keys(config: Mapping[str, Any]) -> list[str]:
    """The ``MCP_*`` keys of ``config`` that flask-mcp does not read, sorted."""
    return sorted(key for key in config if isinstance(key, str) and key.startswith("MCP_") and key not in KEYS)


def unknown_key_message(key: str) -> str:
    return f"{key} is not a flask-mcp setting and is ignored{did_you_mean(key)}"


def _security_settings(value: Callable[[str], Any]) -> dict[str, Any]:
    """Authentication, rate-limit and hardening keys."""
    auth = value("MCP_AUTH")
    if auth not in (True, False, 0, 1):
        raise ConfigError(f"MCP_AUTH must be True or False (got {auth!r})")
    rate_limit = value("MCP_RATE_LIMIT")
    if rate_limit is not None and (not isinstance(rate_limit, str) or not rate_limit.strip()):
        raise ConfigError(f"MCP_RATE_LIMIT must be a string such as '120/minute' (got {rate_limit!r})")
    return {
        "auth": bool(auth),
        "token_verifier": value("MCP_TOKEN_VERIFIER"),
        "auth_servers": tuple(_url(v, "MCP_AUTH_SERVERS") for v in _strings(value("MCP_AUTH_SERVERS"),
                                                                             "MCP_AUTH_SERVERS")),
        "auth_scopes": _strings(value("MCP_AUTH_SCOPES"), "MCP_AUTH_SCOPES"),
        "resource_url": _optional_url(value("MCP_RESOURCE_URL"), "MCP_RESOURCE_URL"),
        "auth_audience": _optional_string(value("MCP_AUTH_AUDIENCE"), "MCP_AUTH_AUDIENCE"),
        "introspection_url": _optional_url(value("MCP_INTROSPECTION_URL"), "MCP_INTROSPECTION_URL"),
        "introspection_client_id": _optional_string(value("MCP_INTROSPECTION_CLIENT_ID"),
                                                    "MCP_INTROSPECTION_CLIENT_ID"),
        "introspection_client_secret": _optional_string(value("MCP_INTROSPECTION_CLIENT_SECRET"),
                                                        "MCP_INTROSPECTION_CLIENT_SECRET"),
        "jwks_url": _optional_url(value("MCP_JWKS_URL"), "MCP_JWKS_URL"),
        "jwt_issuer": _optional_string(value("MCP_JWT_ISSUER"), "MCP_JWT_ISSUER"),
        "jwt_algorithms": _strings(value("MCP_JWT_ALGORITHMS"), "MCP_JWT_ALGORITHMS"),
        "auth_cache_ttl": _number(value("MCP_AUTH_CACHE_TTL"), "MCP_AUTH_CACHE_TTL", minimum=0),
        "auth_timeout": _number(value("MCP_AUTH_TIMEOUT"), "MCP_AUTH_TIMEOUT", minimum=0.01),
        "account_header": _string(value("MCP_ACCOUNT_HEADER"), "MCP_ACCOUNT_HEADER"),
        "rate_limit": rate_limit,
        "rate_limit_storage": _optional_string(value("MCP_RATE_LIMIT_STORAGE"), "MCP_RATE_LIMIT_STORAGE"),
        "cors_origins": tuple(o.rstrip("/") for o in _strings(value("MCP_CORS_ORIGINS"), "MCP_CORS_ORIGINS")),
        "max_json_depth": int(_number(value("MCP_MAX_JSON_DEPTH"), "MCP_MAX_JSON_DEPTH", minimum=2)),
        "max_client_info_bytes": int(_number(value("MCP_MAX_CLIENT_INFO_BYTES"), "MCP_MAX_CLIENT_INFO_BYTES",
                                             minimum=1024)),
    }


def _flag(value: Any, key: str) -> bool:
    if value not in (True, False, 0, 1):
        raise ConfigError(f"{key} must be True or False (got {value!r})")
    return bool(value)


def _instructions(value: Any) -> str | None:
    """Text, or ``None``/``""`` for none (checked here: a number would fail every ``initialize``)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"MCP_INSTRUCTIONS must be a string or None (got {value!r})")
    return value


def _optional_string(value: Any, key: str) -> str | None:
    return None if value is None else _string(value, key)


def _url(value: Any, key: str) -> str:
    """An absolute http(s) URL without a fragment."""
    parts = urlsplit(_string(value, key))
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment or "#" in value:
        raise ConfigError(f"{key} must be an absolute http(s) URL without a fragment (got {value!r})")
    return str(value)


def _optional_url(value: Any, key: str) -> str | None:
    return None if value is None else _url(value, key)


def _with_cors(allowed: tuple[str, ...] | OriginCheck, cors: tuple[str, ...]) -> tuple[str, ...] | OriginCheck:
    """Origins given the CORS preset may also pass the Origin check ("*": every origin)."""
    if not cors:
        return allowed
    if "*" in cors:
        return lambda origin: True
    listed = tuple(origin.rstrip("/") for origin in cors)
    if callable(allowed):
        check = allowed
        return lambda origin: origin.rstrip("/") in listed or check(origin)
    return allowed + listed


def _string(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key} must be a non-empty string (got {value!r})")
    return value


def _number(value: Any, key: str, *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ConfigError(f"{key} must be a number >= {minimum} (got {value!r})")
    return value


def _optional_number(value: Any, key: str, *, minimum: float) -> float | None:
    return None if value is None else _number(value, key, minimum=minimum)


def _share(value: Any, key: str) -> float:
    """A fraction above 0 and at most 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ConfigError(f"{key} must be a number above 0 and at most 1, e.g. 0.5 (got {value!r})")
    return float(value)


def _optional_int(value: Any, key: str) -> int | None:
    number = _optional_number(value, key, minimum=1)
    return None if number is None else int(number)


def _strings(value: Any, key: str) -> tuple[str, ...]:
    """A list of strings; a comma-separated string is accepted too (environment)."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, (list, tuple, set, frozenset)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} must be a list of strings (got {value!r})")
    return tuple(value)
