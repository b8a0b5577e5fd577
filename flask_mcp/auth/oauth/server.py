"""The app as its own OAuth 2.1 authorization server (authlib's Flask
integration): RFC 8414 metadata, ``/oauth/authorize`` behind the app's own
sign-in and a consent page, ``/oauth/token``, RFC 7009 ``/oauth/revoke``,
and the user's "connected apps" page."""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749.errors import OAuth2Error
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from flask import Blueprint, Flask, Response, abort, current_app, redirect, render_template, request, session, url_for
from werkzeug.wrappers import Response as BaseResponse

from ...backends.contracts import redact_url
from ...config import ConfigError, Settings
from .. import hardening
from ..metadata import resource_url
from ..tokens import token_hash
from .clients import Client, ClientRejected, FetchesBusy, MetadataDocuments, client_from_document
from .grants import AuthorizationCodeGrant, RefreshTokenGrant, Revocation, S256Required
from .logos import Logos, image_response
from .pages import ConnectedApp, ago, describe, is_packaged, iso, page_headers, scope_descriptions
from .store import Connection, OAuthStore, TokenRecord
from .verifier import OAuthTokenVerifier

_CSRF_KEY = "mcp_oauth_csrf"

#: The URL schemes of a Redis store: every form ``MCP_BACKEND`` accepts for Redis.
REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+unix", "redis+sentinel", "redis+cluster", "rediss+cluster")


def _flask_login_user() -> str | None:
    from flask_login import current_user

    return str(current_user.get_id()) if current_user.is_authenticated else None


def _flask_login_sign_out() -> None:
    from flask_login import logout_user

    logout_user()


def open_store(app: Flask, spec: Any, prefix: str = "flask-mcp:oauth:") -> OAuthStore:
    """``MCP_OAUTH_STORE`` as a store object."""
    sql_store = _sql_store(app, spec)
    if sql_store is not None:
        return sql_store
    if not isinstance(spec, str):
        redis_module = sys.modules.get("redis")  # a client of the app's: only if redis is imported already
        cluster_module = sys.modules.get("redis.cluster")
        if (redis_module is not None and isinstance(spec, redis_module.Redis)) or (
                cluster_module is not None and isinstance(spec, cluster_module.RedisCluster)):
            from .redis_store import RedisOAuthStore, redis_client

            try:
                return RedisOAuthStore(redis_client(spec), prefix)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return spec  # type: ignore[no-any-return]
    if spec.startswith("sqlite://"):
        from .sqlite_store import SQLiteOAuthStore

        path = spec[len("sqlite:///"):] if spec.startswith("sqlite:///") else ""
        if not path:
            path = os.path.join(app.instance_path, "mcp-oauth.sqlite3")
        return SQLiteOAuthStore(path)
    if spec.partition("://")[0].lower() in REDIS_SCHEMES:
        from .redis_store import RedisOAuthStore

        try:
            return RedisOAuthStore.from_url(spec, prefix)
        except ValueError as exc:
            raise ConfigError(f"MCP_OAUTH_STORE {redact_url(spec)!r} is not a valid Redis URL: {exc}") from None
    raise ConfigError(f"MCP_OAUTH_STORE must be 'sqlite://', 'sqlite:///path', a Redis URL ({', '.join(REDIS_SCHEMES)}"
                      f"://...), 'postgresql://...', a redis.Redis or RedisCluster client, the app's Flask-SQLAlchemy "
                      f"db (or 'flask-sqlalchemy'), an SQLAlchemy engine, or a store object (got {redact_url(spec)!r})")


#: The URL schemes of an SQL store (the app's PostgreSQL, as ``MCP_BACKEND`` takes it).
SQL_SCHEMES = ("postgresql", "postgresql+psycopg", "postgres")


def _sql_store(app: Flask, spec: Any) -> OAuthStore | None:
    """A store in the app's SQL database, if ``spec`` names one: a PostgreSQL
    URL, an SQLAlchemy engine, the app's Flask-SQLAlchemy ``db`` or ``"flask-sqlalchemy"``."""
    flask_sqlalchemy = sys.modules.get("flask_sqlalchemy")
    sqlalchemy = sys.modules.get("sqlalchemy")
    if spec == "flask-sqlalchemy" or (flask_sqlalchemy is not None and isinstance(spec, flask_sqlalchemy.SQLAlchemy)):
        registered = app.extensions.get("sqlalchemy")
        if registered is None or spec not in ("flask-sqlalchemy", registered):
            raise ConfigError("MCP_OAUTH_STORE names Flask-SQLAlchemy, which is not initialised on this app: "
                              "call db.init_app(app) before MCP(app) / mcp.init_app(app)")
        with app.app_context():
            spec = registered.engine
    elif isinstance(spec, str) and spec.partition("://")[0].lower() in SQL_SCHEMES:
        from .sql_store import SqlOAuthStore

        try:
            return SqlOAuthStore(spec)
        except ValueError as exc:
            raise ConfigError(f"MCP_OAUTH_STORE {redact_url(spec)!r}: {exc}") from None
    if sqlalchemy is not None and isinstance(spec, sqlalchemy.Engine):
        from .sql_store import SqlOAuthStore

        return SqlOAuthStore(spec)
    return None


class OAuthServer:
    """Everything the authorization server needs, kept in ``app.extensions["mcp_oauth"]``.

    Also the Python API for an app's own account pages: :meth:`connections`
    and :meth:`revoke_client`."""

    def __init__(self, app: Flask, settings: Settings) -> None:
        config = app.config  # init_app set every MCP_OAUTH_* default (config.OAUTH_DEFAULTS)
        if not settings.auth:
            raise ConfigError("MCP_OAUTH needs MCP_AUTH = True: the endpoint must ask for the tokens it issues")
        self.store = open_store(app, config["MCP_OAUTH_STORE"], str(config["MCP_OAUTH_STORE_PREFIX"]))
        self.current_user: Callable[[], str | None] = config["MCP_OAUTH_CURRENT_USER"] or _flask_login_user
        # "Not you?" signs out through the app: its own function, or Flask-Login's when it is the sign-in.
        self.sign_out: Callable[[], Any] | None = config["MCP_OAUTH_SIGN_OUT"] or (
            None if config["MCP_OAUTH_CURRENT_USER"] else _flask_login_sign_out)
        self.scope_descriptions = scope_descriptions(config["MCP_OAUTH_SCOPE_DESCRIPTIONS"])
        self.access_ttl = int(config["MCP_OAUTH_ACCESS_TOKEN_TTL"])
        self.refresh_ttl = float(config["MCP_OAUTH_REFRESH_TOKEN_TTL"])
        self.documents = MetadataDocuments(
            timeout=float(config["MCP_OAUTH_CIMD_TIMEOUT"]),
            cache_ttl=float(config["MCP_OAUTH_CIMD_CACHE_TTL"]),
            allow_loopback=bool(config["MCP_OAUTH_CIMD_ALLOW_LOOPBACK"]),
            verify=config["MCP_OAUTH_CIMD_CA_BUNDLE"] or True,
            max_fetches=int(config["MCP_OAUTH_CIMD_MAX_FETCHES"]),
        )
        self.logos = Logos(self.documents, cache_ttl=float(config["MCP_OAUTH_CIMD_CACHE_TTL"]))
        self.authlib = AuthorizationServer(app, query_client=self._query_client, save_token=self._save_token)
        self.authlib.register_token_generator(
            "default", BearerTokenGenerator(_random_token, _random_token, lambda client, grant_type: self.access_ttl)
        )
        resource = staticmethod(self.resource)
        code_grant = type("CodeGrant", (AuthorizationCodeGrant,), {
            "store": self.store, "resource": resource, "supported_scopes": staticmethod(_supported_scopes),
            "code_ttl": float(config["MCP_OAUTH_CODE_TTL"])})
        self.authlib.register_grant(code_grant, [S256Required(required=True)])
        self.authlib.register_grant(type("RefreshGrant", (RefreshTokenGrant,), {"store": self.store}))
        self.authlib.register_endpoint(type("RevocationEndpoint", (Revocation,), {"store": self.store}))
        self.dynamic_registration = bool(config["MCP_OAUTH_DYNAMIC_REGISTRATION"])
        if self.dynamic_registration:
            from .registration import Registration

            self.authlib.register_endpoint(type("RegistrationEndpoint", (Registration,), {
                "store": self.store, "server_metadata": staticmethod(self.metadata)}))
        self.verifier = OAuthTokenVerifier(self.store)
        app.extensions["mcp_oauth"] = self
        blueprint = _blueprint()
        app.register_blueprint(blueprint)
        # Flask-WTF's CSRFProtect, set up before or after: clients post to /oauth/token without a form
        # token, and the consent and connections forms carry their own (checked by _check_csrf).
        hardening.install(app, [blueprint], cors=False)

    # ------------------------------------------------------------------ addresses

    def issuer(self) -> str:
        configured = current_app.config["MCP_OAUTH_ISSUER"]
        return str(configured).rstrip("/") if configured else request.url_root.rstrip("/")

    def resource(self) -> str:
        return resource_url(current_app.extensions["mcp"].settings)

    def metadata(self) -> dict[str, Any]:
        """RFC 8414 authorization server metadata."""
        base = self.issuer()
        scopes = _supported_scopes()
        document: dict[str, Any] = {
            "issuer": base,
            "authorization_endpoint": base + "/oauth/authorize",
            "token_endpoint": base + "/oauth/token",
            "revocation_endpoint": base + "/oauth/revoke",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "revocation_endpoint_auth_methods_supported": ["none"],
            "client_id_metadata_document_supported": True,
        }
        if scopes:
            document["scopes_supported"] = list(scopes)
        if self.dynamic_registration:
            document["registration_endpoint"] = base + "/oauth/register"
        return document

    # ------------------------------------------------------------------ authlib callbacks

    def _query_client(self, client_id: str) -> Client | None:
        if not client_id:
            return None
        if not client_id.startswith("https://"):
            document = self.store.client_document(client_id)
            return client_from_document(client_id, document) if document else None
        try:
            return self.documents.get(client_id)
        except ClientRejected as exc:
            current_app.logger.warning("OAuth: client %r refused: %s", client_id, exc)
            request.environ["flask_mcp.auth.oauth.client_error"] = str(exc)
            request.environ["flask_mcp.auth.oauth.client_busy"] = isinstance(exc, FetchesBusy)
            return None

    def _save_token(self, token: dict[str, Any], req: Any) -> None:
        now = time.time()
        if getattr(req, "refresh_token", None) is not None and req.payload.grant_type == "refresh_token":
            previous = req.refresh_token.record
            family, resource = previous.family, previous.resource
        else:
            code = req.authorization_code  # its family was chosen when the code was taken
            family, resource = code.family, code.record.resource
        refresh = token.get("refresh_token")
        self.store.save_token(TokenRecord(
            access_hash=token_hash(token["access_token"]),
            refresh_hash=token_hash(refresh) if refresh else None,
            family=family,
            client_id=req.client.client_id,
            user_id=str(req.user),
            scope=token.get("scope", ""),
            resource=resource,
            issued_at=now,
            expires_at=now + self.access_ttl,
            refresh_expires_at=now + self.refresh_ttl,
        ), req.client.client_name)

    # ------------------------------------------------------------------ the user's API

    def connections(self, user_id: str) -> list[Connection]:
        """The clients ``user_id`` connected and has not revoked."""
        return self.store.connections(str(user_id))

    def revoke_client(self, user_id: str, client_id: str) -> int:
        """Disconnect a client: every token it holds for ``user_id`` stops working now."""
        return self.store.revoke_client(str(user_id), client_id)


def _supported_scopes() -> tuple[str, ...]:
    state = current_app.extensions["mcp"]
    return tuple(state.settings.auth_scopes or state.extension.declared_scopes())


def _random_token(*args: Any, **kwargs: Any) -> str:
    return secrets.token_urlsafe(32)


def _server() -> OAuthServer:
    server: OAuthServer = current_app.extensions["mcp_oauth"]
    return server


# ---------------------------------------------------------------------- views


def _csrf_token() -> str:
    token = session.get(_CSRF_KEY)
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        session[_CSRF_KEY] = token
    return token


def _check_csrf() -> None:
    expected = session.get(_CSRF_KEY)
    sent = request.form.get("csrf_token", "")
    if not isinstance(expected, str) or not secrets.compare_digest(expected, sent):
        abort(Response("The form's CSRF token is missing or wrong: reload the page and try again.", 400,
                       mimetype="text/plain"))


def _no_framing(response: BaseResponse) -> BaseResponse:
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
    response.headers["Cache-Control"] = "no-store"
    return response


def _login_redirect(next_path: str | None = None) -> BaseResponse:
    login = current_app.config["MCP_OAUTH_LOGIN_URL"]
    if login is None:
        manager = getattr(current_app, "login_manager", None)
        view = getattr(manager, "login_view", None)
        if not view:
            abort(Response("Sign-in is required, and this app names no login page (MCP_OAUTH_LOGIN_URL).", 401,
                           mimetype="text/plain"))
        login = url_for(view)
    separator = "&" if "?" in login else "?"
    return redirect(login + separator + urlencode({"next": next_path or request.full_path}))


def _error_page(error: OAuth2Error) -> BaseResponse:
    detail = request.environ.get("flask_mcp.auth.oauth.client_error") or error.description or error.error
    if request.environ.get("flask_mcp.auth.oauth.client_busy"):  # RFC 6749 4.1.2.1's code for "not now"
        body = json.dumps({"error": "temporarily_unavailable", "error_description": detail})
        response = Response(body, 503, mimetype="application/json")
        response.headers["Retry-After"] = "1"
        return _no_framing(response)
    body = json.dumps({"error": error.error, "error_description": detail})
    return _no_framing(Response(body, 400, mimetype="application/json"))


def authorize() -> BaseResponse:
    server = _server()
    user = server.current_user()
    if user is None:
        return _login_redirect()
    if request.method == "POST":
        _check_csrf()
    try:
        grant = server.authlib.get_consent_grant(end_user=user)
    except OAuth2Error as error:
        if error.redirect_uri:
            return _no_framing(server.authlib.handle_error_response(grant_request(server), error))
        return _error_page(error)
    if request.method == "POST":
        granted = user if request.form.get("decision") == "allow" else None
        return _no_framing(server.authlib.create_authorization_response(grant_user=granted, grant=grant))
    client: Client = grant.client
    redirect_uri = grant.redirect_uri or client.redirect_uris[0]
    scopes = (grant.request.scope or "").split()
    template = current_app.config["MCP_OAUTH_CONSENT_TEMPLATE"]
    page = render_template(
        template,
        client=client,
        client_name=client.client_name,
        client_id=client.client_id,
        # where the client's metadata document lives (None: a dynamically registered client)
        client_host=urlsplit(client.client_id).netloc if client.client_id.startswith("https://") else None,
        logo_url=url_for("mcp_oauth.logo", client_id=client.client_id),
        client_home=client.client_uri,
        client_home_host=urlsplit(client.client_uri).netloc if client.client_uri else None,
        redirect_host=urlsplit(redirect_uri).netloc,
        scopes=scopes,
        scope_lines=describe(scopes, server.scope_descriptions),
        resource=server.resource(),
        service_name=_service_name(),
        account=user,
        switch_account_action=url_for("mcp_oauth.switch_account") if server.sign_out else None,
        csrf_token=_csrf_token(),
        action=request.full_path,
    )
    return page_headers(Response(page, mimetype="text/html"), is_packaged(template))


def _service_name() -> str:
    info = current_app.extensions["mcp"].server.info
    return str(info.title or info.name)


def switch_account() -> BaseResponse:
    """"Not you?": sign out through the app, then to its sign-in, and back to the consent page."""
    server = _server()
    _check_csrf()
    back = request.form.get("next", "")
    if not back.startswith("/oauth/authorize?") or server.sign_out is None:
        abort(Response("This form may only return to the consent page.", 400, mimetype="text/plain"))
    if server.current_user() is not None:
        server.sign_out()
    return _no_framing(_login_redirect(back))


def logo() -> BaseResponse:
    """A client's logo, fetched and checked by the server (never hot-linked), or the placeholder."""
    server = _server()
    if server.current_user() is None:
        abort(Response("Sign in to see client logos.", 401, mimetype="text/plain"))
    client_id = request.args.get("client_id", "")
    if not client_id or len(client_id) > 2000:
        abort(Response("Name the client: /oauth/logo?client_id=...", 400, mimetype="text/plain"))
    client = server._query_client(client_id)
    found = server.logos.get(client.logo_uri) if client is not None and client.logo_uri else None
    return image_response(found, max_age=int(server.logos.cache_ttl))


def grant_request(server: OAuthServer) -> Any:
    return server.authlib.create_oauth2_request(request)


def token() -> Response:
    response: Response = _server().authlib.create_token_response()
    return response


def revoke() -> Response:
    response: Response = _server().authlib.create_endpoint_response("revocation")
    return response


def register() -> Response:
    server = _server()
    if not server.dynamic_registration:
        abort(404)
    response: Response = server.authlib.create_endpoint_response("client_registration")
    return response


def metadata() -> Response:
    response = Response(json.dumps(_server().metadata()), mimetype="application/json")
    response.headers["Access-Control-Allow-Origin"] = "*"
    return response


def connections() -> BaseResponse:
    server = _server()
    user = server.current_user()
    if user is None:
        return _login_redirect()
    if request.method == "POST":
        _check_csrf()
        server.revoke_client(user, request.form.get("client_id", ""))
        return _no_framing(redirect(url_for("mcp_oauth.connections")))
    template = current_app.config["MCP_OAUTH_CONNECTIONS_TEMPLATE"]
    apps = [ConnectedApp(
        connection=c,
        logo_url=url_for("mcp_oauth.logo", client_id=c.client_id),
        scopes=describe(c.scope, server.scope_descriptions),
        last_used=ago(c.last_used) if c.last_used is not None else None,
        last_used_iso=iso(c.last_used) if c.last_used is not None else None,
        connected=ago(c.first_connected),
    ) for c in server.connections(user)]
    page = render_template(template, connections=[a.connection for a in apps], apps=apps, account=user,
                           service_name=_service_name(), csrf_token=_csrf_token())
    return page_headers(Response(page, mimetype="text/html"), is_packaged(template))


def _blueprint() -> Blueprint:
    bp = Blueprint("mcp_oauth", __name__, template_folder="templates")
    bp.add_url_rule("/.well-known/oauth-authorization-server", "metadata", metadata, methods=["GET"])
    bp.add_url_rule("/oauth/authorize", "authorize", authorize, methods=["GET", "POST"])
    bp.add_url_rule("/oauth/token", "token", token, methods=["POST"])
    bp.add_url_rule("/oauth/revoke", "revoke", revoke, methods=["POST"])
    bp.add_url_rule("/oauth/register", "register", register, methods=["POST"])
    bp.add_url_rule("/oauth/connections", "connections", connections, methods=["GET", "POST"])
    bp.add_url_rule("/oauth/logo", "logo", logo, methods=["GET"])
    bp.add_url_rule("/oauth/switch-account", "switch_account", switch_account, methods=["POST"])
    return bp
