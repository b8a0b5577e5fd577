"""The Flask extension object: configuration, registration, decorators."""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, Unpack, overload

from flask import Flask, current_app, has_app_context

from .auth import hardening, login
from .auth.bearer import Authenticator
from .auth.metadata import register_metadata
from .auth.ratelimit import RateLimits
from .auth.tokens import AsyncTokenVerifier, Principal, TokenVerifier, as_verifier
from .auth.users import UserTokens, cached_user_loader
from .auth.verifiers import verifier_from_settings
from .backends import Backend, open_backend
from .backends.contracts import CountableStore, StatusCountingStore
from .config import KEYS, ConfigError, Settings, load_settings
from .context import Context
from .coroutines import synced
from .environment import ignored_settings
from .features.options import ToolOptions, check_options
from .features.resources_and_prompts import ResourcesAndPromptsMixin
from .features.skills.api import SkillsMixin
from .features.skills.catalog import ResourcesWithSkills
from .features.tools import Tool, ToolRegistry
from .http.blueprint import create_blueprint
from .http.capacity import gunicorn_workers
from .http.state import MCPState
from .protocol.bus import EVENTS_CHANNEL
from .protocol.durable import SendDurable
from .protocol.errors import InternalError
from .protocol.info import ProtocolOptions, ServerInfo
from .protocol.input_requests import state_key
from .protocol.queued_tasks import TaskQueue
from .protocol.request_info import RequestInfo
from .protocol.server import Server
from .protocol.subscriptions import list_changed_event, resource_updated_event
from .protocol.task_methods import Tasks
from .tasks.threads import in_background, watch
from .telemetry.gauges import Cached, CachedCount, GaugeSources
from .telemetry.observer import Telemetry

logger = logging.getLogger("flask_mcp")

F = TypeVar("F", bound=Callable[..., Any])
#: A token verifier: ``token -> Principal | None`` (plain or ``async def``), or an object with ``verify``.
V = TypeVar(
    "V", bound="Callable[[str], Principal | None | Awaitable[Principal | None]] | TokenVerifier | AsyncTokenVerifier"
)
InstructionsSource = str | Callable[..., "str | None"]
T = TypeVar("T", bound=Callable[[str], Any])
U = TypeVar("U", bound=Callable[[Principal], Any])

_AUTH_LEFT_OFF = ("A token verifier is registered but MCP_AUTH is not set, so the MCP endpoint takes every "
                  "caller without a token: set MCP_AUTH = True (or MCP_AUTH = False to serve without tokens "
                  "on purpose).")


class MCP(ResourcesAndPromptsMixin, SkillsMixin):
    """Turns a Flask app into an MCP server.

    ``mcp = MCP(app)``, or ``mcp = MCP()`` then ``mcp.init_app(app)``. Keyword
    arguments beat the app's ``MCP_*`` configuration, which beats the defaults.
    """

    def __init__(
        self,
        app: Flask | None = None,
        *,
        name: str | None = None,
        version: str | None = None,
        title: str | None = None,
        description: str | None = None,
        website_url: str | None = None,
        icons: Sequence[dict[str, Any]] | None = None,
        instructions: InstructionsSource | None = None,
    ) -> None:
        self._overrides = {"MCP_NAME": name, "MCP_VERSION": version}
        self._title = title
        self._description = description
        self._website_url = website_url
        self._icons = tuple(dict(icon) for icon in icons or ())
        self._instructions: InstructionsSource | None = (
            synced(instructions, "MCP(instructions=...)") if callable(instructions) else instructions
        )
        self._tools = ToolRegistry()
        self._tools.on_list_changed.append(self._changed)
        ResourcesAndPromptsMixin.__init__(self, self._changed, self._forget_cached)
        SkillsMixin.__init__(self, self._changed)
        #: The cores built by init_app, one per app (their prepared capabilities
        #: are dropped whenever a feature is added or removed).
        self._servers: list[Server] = []
        self._token_verifier: TokenVerifier | None = None
        self._user_loader: Callable[[Principal], Any] | None = None
        #: Names of the apps that left MCP_AUTH unset and so serve without tokens.
        self._auth_left_off: list[str] = []
        self.blueprint = create_blueprint()
        if app is not None:
            self.init_app(app)

    # ------------------------------------------------------------------ set-up

    def init_app(self, app: Flask) -> None:
        """Read and validate the ``MCP_*`` configuration and mount the endpoints."""
        if "mcp" in app.extensions:
            raise RuntimeError("This app already has an MCP extension; call init_app once per app.")
        ignored = ignored_settings(os.environ, app.config)  # before the defaults fill app.config in
        auth_unset = "MCP_AUTH" not in app.config
        for key, default in KEYS.items():
            app.config.setdefault(key, default)
        settings = load_settings(app.config, self._overrides, app.name)
        if ignored and settings.strict_config:
            raise ConfigError("MCP_STRICT_CONFIG is on: " + "; ".join(ignored))
        for message in ignored:
            logger.warning(message)
        verifier = verifier_from_settings(settings)
        backend = _open_backend(app, settings)
        try:
            rate_limits = RateLimits(settings, backend)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        info = ServerInfo(
            name=settings.name,
            version=settings.version,
            title=self._title,
            description=self._description,
            website_url=self._website_url,
            icons=self._icons,
        )
        static_instructions = settings.instructions
        server = Server(
            info=info,
            tools=self._tools,
            sessions=backend.sessions,
            options=ProtocolOptions(
                page_size=settings.page_size,
                ttl_ms=settings.cache_ttl_ms,
                cache_scope=settings.cache_scope,
                max_json_depth=settings.max_json_depth,
                max_client_info_bytes=settings.max_client_info_bytes,
                skills_directory_read=settings.skills_directory_read,
            ),
            instructions=functools.partial(self._instructions_for, fallback=static_instructions),  # no lambda frame
            state_key=_request_state_key,
            bus=backend.bus,
            events=backend.events,
            resources=ResourcesWithSkills(self._resources, self._skills),
            prompts=self._prompts,
            completions=self._completions,
            tasks=_tasks(app, backend, settings),
            skills=self._skills,
            durable=_durable_runner(settings),
        )
        self._servers.append(server)
        if app.config.get("MCP_OAUTH"):  # the app as its own authorization server (flask-mcp[oauth])
            from .auth.oauth.server import OAuthServer

            verifier = OAuthServer(app, settings).verifier
        telemetry = Telemetry(settings.version, server.methods.rounds) if settings.telemetry else None
        server.observer = telemetry
        if server.methods.tasks is not None:
            server.methods.tasks.observer = telemetry
        authenticator = Authenticator(settings, verifier, lambda: self._token_verifier,
                                      user_loader=lambda: self._user_loader)
        state = app.extensions["mcp"] = MCPState(self, settings, server, backend, authenticator, rate_limits,
                                                 telemetry, ignored_settings=tuple(ignored))
        if telemetry is not None:
            telemetry.gauges(_gauge_sources(state))
        app.register_blueprint(self.blueprint, url_prefix=settings.url_prefix)
        register_metadata(app, settings, self._token_verifier or verifier)  # RFC 9728, when MCP_AUTH is on
        login.install(app, settings.url_prefix)  # a cookie never authenticates an MCP call
        if auth_unset and not settings.auth:
            self._auth_left_off.append(app.name)
            if self._token_verifier is not None:
                logger.warning(_AUTH_LEFT_OFF)
        rate_limits.install(app, self.blueprint)
        hardening.install(app, [self.blueprint], cors=bool(settings.cors_origins), endpoint=True)  # CSRF, CORS
        from .cli import register as register_cli  # click is imported by the command line only

        register_cli(app)  # `flask mcp ...`

    # ------------------------------------------------------------------ authentication

    def token_verifier(self, fn: V) -> V:
        """Check bearer tokens with ``fn(token) -> Principal | None`` (or an object
        with ``verify(token)``; either may be ``async def``) when ``MCP_AUTH`` is on;
        beats ``MCP_TOKEN_VERIFIER``. Return ``None`` or raise
        :class:`~flask_mcp.auth.InvalidToken` to refuse (401)."""
        self._token_verifier = as_verifier(fn)
        self._warn_if_auth_left_off()
        return fn

    @overload
    def verify_token(self, fn: T) -> T: ...

    @overload
    def verify_token(self, fn: None = None, *, cache_ttl: float | None = None) -> Callable[[T], T]: ...

    def verify_token(self, fn: Callable[[str], Any] | None = None, *, cache_ttl: float | None = None) -> Any:
        """Check the app's own API tokens, as Flask-HTTPAuth's ``verify_token``
        does: ``fn(token)`` returns the app's user (it becomes ``ctx.user`` and
        Flask-Login's ``current_user``; the caller's subject is its ``get_id()``),
        a :class:`~flask_mcp.auth.Principal` (scopes, expiry), or ``None`` to
        refuse (401). It runs inside the request context, on every request unless
        ``cache_ttl`` seconds are given (answers kept by a hash of the token).
        Like ``@mcp.token_verifier``, it is in force when ``MCP_AUTH`` is on:
        registering it does not turn authentication on."""

        def register(func: Callable[[str], Any]) -> Callable[[str], Any]:
            self._token_verifier = UserTokens(func, cache_ttl=cache_ttl,
                                              reload=lambda: cached_user_loader(self._user_loader))
            self._warn_if_auth_left_off()
            return func

        return register if fn is None else register(fn)

    def user_loader(self, fn: U) -> U:
        """Load the app's user for a verified caller, as Flask-Login's
        ``user_loader`` does for a session: ``fn(principal) -> user | None``.
        Called once per request, right after the token is checked; ``None``
        refuses the token (401: its user is gone). The user is ``ctx.user`` and,
        with Flask-Login, ``current_user``. May be registered before or after
        ``init_app``, and be ``async def``."""
        self._user_loader = synced(fn, "@mcp.user_loader")
        return fn

    def _warn_if_auth_left_off(self) -> None:
        if self._auth_left_off:
            logger.warning(_AUTH_LEFT_OFF)

    # ------------------------------------------------------------------ tools

    @overload
    def tool(self, fn: F) -> F: ...

    @overload
    def tool(self, fn: None = None, **options: Unpack[ToolOptions]) -> Callable[[F], F]: ...

    def tool(self, fn: Callable[..., Any] | None = None, **options: Unpack[ToolOptions]) -> Any:
        """Register a function as a tool; the function is returned unchanged.

        Bare (``@mcp.tool``) or with options (:class:`~flask_mcp.features.options.ToolOptions`):
        ``name``, ``title``, ``description`` (default: the docstring), ``annotations``
        (``readOnlyHint``...), ``icons``, ``meta`` and ``input_schema`` (a raw JSON
        Schema that replaces the one built from type hints; you then validate the
        arguments yourself). ``scopes``: what the caller's token must grant (others
        get 403 and do not see the tool listed); ``rate_limit``: calls per caller,
        e.g. ``"10/minute"``. ``ui``: the ``ui://`` view (``@mcp.ui_resource``) that
        hosts show with its results, and ``visibility``: who may call it,
        ``["model", "app"]`` (default). ``task``: ``"optional"`` or ``"required"``
        lets a 2026-07-28 call that declares the tasks extension run as a task (the
        client gets a task handle and polls it; ``"required"`` refuses other
        2026-07-28 clients with ``-32021``); with ``task_start="explicit"`` the task
        begins at ``ctx.start_task()`` instead of with the call, so the tool can ask
        the client first (multi round-trip).
        """
        check_options("tool()", options, ToolOptions)

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self.add_tool(func, **options)
            return func

        return register if fn is None else register(fn)

    def add_tool(self, fn: Callable[..., Any], **options: Unpack[ToolOptions]) -> None:
        """Register a tool at any time (see :meth:`tool` for the options); during
        a request, listen streams hear that the list changed."""
        self._tools.add(Tool.from_function(fn, **options))

    def remove_tool(self, name: str) -> None:
        self._tools.remove(name)

    # ------------------------------------------------------------------ change notifications

    def notify_tools_changed(self) -> None:
        """Tell every open ``subscriptions/listen`` stream, in every worker and host
        sharing the backend, that the tool list changed. Needs an app context."""
        self._publish(list_changed_event("tools"))

    def notify_prompts_changed(self) -> None:
        self._publish(list_changed_event("prompts"))

    def notify_resources_changed(self) -> None:
        self._publish(list_changed_event("resources"))

    def notify_resource_updated(self, uri: str) -> None:
        """Tell listen streams subscribed to ``uri`` (or a parent of it) that it changed."""
        self._publish(resource_updated_event(uri))

    def _forget_cached(self) -> None:
        for server in list(self._servers):
            server.methods.forget_cached()

    def _changed(self, kind: str) -> None:
        self._forget_cached()
        if has_app_context() and current_app.extensions.get("mcp", None) is not None:
            self._publish(list_changed_event(kind))

    def _publish(self, event: dict[str, Any]) -> None:
        state: MCPState = current_app.extensions["mcp"]
        if state.backend.bus is not None:
            state.backend.bus.publish(EVENTS_CHANNEL, event)

    @property
    def tools(self) -> ToolRegistry:
        return self._tools

    def declared_scopes(self) -> tuple[str, ...]:
        """Every scope a registered tool, resource, prompt or skill asks for (what the
        RFC 9728 metadata lists when ``MCP_AUTH_SCOPES`` is not set), sorted."""
        found = (self._tools.declared_scopes() | self._resources.declared_scopes()
                 | self._prompts.declared_scopes() | self._skills.declared_scopes())
        return tuple(sorted(found))

    @property
    def config_overrides(self) -> dict[str, Any]:
        """The constructor's keyword arguments that beat the app's ``MCP_*`` keys."""
        return dict(self._overrides)

    # ------------------------------------------------------------------ instructions

    def instructions(self, fn: F) -> F:
        """Compute the instructions per request (``initialize``, ``server/discover``).

        The function takes a :class:`Context` (or nothing) and returns text or ``None``;
        it may be ``async def`` (run as Flask runs async views).
        """
        self._instructions = synced(fn, "@mcp.instructions")
        return fn

    def _instructions_for(self, request: RequestInfo, fallback: str | None) -> str | None:
        source = self._instructions if self._instructions is not None else fallback
        if source is None or isinstance(source, str):
            return source
        if inspect.signature(source).parameters:
            return source(Context(request))
        return source()


def _tasks(app: Flask, backend: Backend, settings: Settings) -> Tasks | None:
    """The tasks extension, when the backend keeps tasks (not a bare cachelib cache);
    its tools run in threads of the web worker, or on Celery (``MCP_TASK_RUNNER``)."""
    if backend.tasks is None:
        return None
    queue = None
    if settings.task_runner == "celery":
        try:
            from .tasks import celery as celery_runner
        except ImportError as exc:
            raise ConfigError(
                f'MCP_TASK_RUNNER = "celery" needs Celery: pip install "flask-mcp[celery]" ({exc})'
            ) from None
        celery_runner.register(app)
        queue = TaskQueue(celery_runner.send)
    ttl = settings.task_ttl
    return watch(Tasks(
        backend.tasks,
        spawn=in_background,
        ttl_ms=None if ttl is None else round(ttl * 1000),
        poll_interval_ms=settings.task_poll_interval_ms,
        bus=backend.bus,
        max_running=settings.task_max_running,
        queue=queue,
    ))


def _durable_runner(settings: Settings) -> SendDurable | None:
    """Where durable calls of legacy sessions go: Celery with ``MCP_TASK_RUNNER =
    "celery"`` (its absence was reported by :func:`_tasks`); else nowhere, they run here."""
    if settings.task_runner != "celery":
        return None
    try:
        from .tasks import celery as celery_runner
    except ImportError:
        return None
    return celery_runner.send_durable


def _gauge_sources(state: MCPState) -> GaugeSources:
    """What the operator gauges read: the stores' counts (when they can count), cached."""
    backend, tasks = state.backend, state.server.methods.tasks
    by_status = backend.tasks if isinstance(backend.tasks, StatusCountingStore) else None
    return GaugeSources(
        sessions=CachedCount(backend.sessions.count) if isinstance(backend.sessions, CountableStore) else None,
        tasks=(CachedCount(backend.tasks.count)
               if isinstance(backend.tasks, CountableStore) and by_status is None else None),
        task_statuses=Cached(by_status.count_by_status) if by_status is not None else None,
        running_tasks=tasks.running_here if tasks is not None else None,
        long_lived_streams=lambda: state.stream_slots.held,
        response_streams=lambda: state.open_streams.value,
    )


def _request_state_key() -> bytes:
    """The key that seals 2026-07-28 ``requestState``: derived from the app's
    ``SECRET_KEY``, so every worker and host of the app agrees on it."""
    secret = current_app.config.get("SECRET_KEY")
    if not secret:
        raise InternalError(
            "This tool asks the client for input, which needs the app's SECRET_KEY "
            "(it seals requestState); set SECRET_KEY in the app's configuration."
        )
    return state_key(secret)


def _is_flask_sqlalchemy(spec: object) -> bool:
    module = sys.modules.get("flask_sqlalchemy")
    return module is not None and isinstance(spec, module.SQLAlchemy)


def _flask_sqlalchemy_engine(app: Flask, spec: object) -> object:
    """The engine of the app's Flask-SQLAlchemy (``MCP_BACKEND = db`` or
    ``"flask-sqlalchemy"``): sessions then live in the app's own database,
    through its pool. Flask-SQLAlchemy keeps one engine per app, so it must be
    initialised on this app first."""
    registered = app.extensions.get("sqlalchemy")
    if registered is None or spec not in ("flask-sqlalchemy", registered):
        raise ConfigError(
            "MCP_BACKEND names Flask-SQLAlchemy, which is not initialised on this app: "
            "call db.init_app(app) before MCP(app) / mcp.init_app(app)"
        )
    with app.app_context():
        return registered.engine


def _open_backend(app: Flask, settings: Settings) -> Backend:
    """``MCP_BACKEND`` as a :class:`Backend`: a URI, an object, or a shorthand
    for what the app already configured (``"flask-session"``, ``"flask-caching"``)."""
    spec = settings.backend
    if spec == "flask-session":
        spec = app.config.get("SESSION_REDIS") or getattr(app.session_interface, "client", None)
        if spec is None:
            raise ConfigError("MCP_BACKEND 'flask-session' needs Flask-Session with SESSION_REDIS configured")
    elif spec == "flask-caching":
        caching = app.extensions.get("cache")
        if not caching:
            raise ConfigError("MCP_BACKEND 'flask-caching' needs Flask-Caching initialised before flask-mcp")
        spec = next(iter(caching.values())) if isinstance(caching, dict) else caching
        spec = getattr(spec, "cache", spec)
    if spec == "flask-sqlalchemy" or _is_flask_sqlalchemy(spec):
        spec = _flask_sqlalchemy_engine(app, spec)
    try:
        backend = open_backend(
            spec, timeout=settings.session_timeout, instance_path=app.instance_path, retention=settings.sse_retention
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    description = backend.describe()
    workers = gunicorn_workers()  # one process (flask run, a script, tests): memory:// is fine
    if description.startswith("memory") and workers is not None and workers > 1:
        logger.warning(
            "MCP_BACKEND is memory://: sessions live in this process only, so with %d "
            "gunicorn workers legacy clients will lose theirs. Use sqlite:// (one machine) "
            "or redis:// (several).", workers,
        )
    if not backend.supports_bus:
        logger.warning(
            "MCP_BACKEND %s carries no messages between workers: features that need it "
            "(answers to server requests on legacy sessions, cancellation, subscriptions) "
            "will be refused. Use sqlite:// or redis:// for them.",
            description,
        )
    logger.info("flask-mcp sessions in %s", description)
    return backend
