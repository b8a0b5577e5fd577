"""``@mcp.verify_token`` (the app's own API tokens, Flask-HTTPAuth's way) and
``@mcp.user_loader``, over Flask's test client: what the function may return,
where it runs, its opt-in cache, and the two configuration warnings
(an empty ``MCP_AUTH_SERVERS``, ``MCP_AUTH`` left unset)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import FakeClock
from flask import Flask, current_app, g, request
from flask_login import LoginManager

from flask_mcp import MCP, Context
from flask_mcp.auth import InvalidToken, Principal, token_hash
from flask_mcp.auth.users import UserTokens
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]
SERVERS_WARNING = "MCP_AUTH_SERVERS is empty"
LEFT_OFF_WARNING = "MCP_AUTH is not set"


class User:
    """What Flask-Login asks of a user class (its UserMixin, written out: it ships no types)."""

    is_authenticated = True
    is_active = True
    is_anonymous = False

    def __init__(self, user_id: int, name: str) -> None:
        self.id = user_id
        self.name = name

    def get_id(self) -> str:
        return str(self.id)


class Account:
    """A user class of an app without Flask-Login: no get_id(), an id."""

    def __init__(self, account_id: int) -> None:
        self.id = account_id


def new_app(**config: Any) -> Flask:
    app = Flask("user_tokens")
    app.config.update({"MCP_AUTH": True, "MCP_BACKEND": "memory://", "TESTING": True, **config})
    return app


def serve(mcp: MCP) -> None:
    @mcp.tool
    def whoami(ctx: Context) -> dict[str, Any]:
        principal = ctx.principal
        assert principal is not None
        user = ctx.user
        return {"subject": principal.subject, "scopes": sorted(principal.scopes),
                "user": getattr(user, "name", None) if user is not None else None}


def call(make_client: MakeClient, app: Flask, token: str, tool: str = "whoami") -> Any:
    return make_client(app, headers={"Authorization": f"Bearer {token}"}).call_tool(tool)


def the_verifier(app: Flask) -> UserTokens:
    verifier = app.extensions["mcp"].authenticator.decorated()
    assert isinstance(verifier, UserTokens)
    return verifier


# ---------------------------------------------------------------------- what it returns


def test_a_returned_user_is_ctx_user_and_its_get_id_the_subject(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app)
    serve(mcp)

    @mcp.verify_token
    def verify(token: str) -> User | None:
        return User(7, "ann") if token == "ann-token" else None

    assert call(make_client, app, "ann-token").result["structuredContent"] == {
        "subject": "7", "scopes": [], "user": "ann"}


def test_a_user_without_get_id_is_named_by_its_id(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app)

    @mcp.tool
    def account(ctx: Context) -> str:
        assert ctx.principal is not None and isinstance(ctx.user, Account)
        return f"{ctx.principal.subject}/{ctx.user.id}"

    mcp.verify_token(lambda token: Account(42))
    assert call(make_client, app, "t", "account").result["content"][0]["text"] == "42/42"


def test_a_returned_principal_is_taken_as_it_is(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app)
    serve(mcp)

    @mcp.verify_token
    def verify(token: str) -> Principal | None:
        return Principal(subject="robot", scopes=frozenset({"files:read"}), expires_at=time.time() + 60)

    assert call(make_client, app, "any").result["structuredContent"] == {
        "subject": "robot", "scopes": ["files:read"], "user": None}


@pytest.mark.parametrize("refusal", ["none", "raise", "expired"])
def test_refusals_are_401_invalid_token(make_client: MakeClient, refusal: str) -> None:
    app = new_app()
    mcp = MCP(app)
    serve(mcp)

    @mcp.verify_token
    def verify(token: str) -> Principal | None:
        if refusal == "raise":
            raise InvalidToken("That token was revoked.")
        if refusal == "expired":  # expires_at: seconds since the epoch, a float
            return Principal(subject="late", expires_at=time.time() - 1.0)
        return None

    response = call(make_client, app, "nope")
    assert response.status_code == 401
    assert response.error["data"]["error"] == "invalid_token"
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]


def test_it_runs_inside_the_request_context(make_client: MakeClient) -> None:
    """So ``g``, ``current_app`` and ``request`` (and the app's DB session) work in it."""
    app = new_app(API_REALM="billing")
    mcp = MCP(app)
    serve(mcp)
    seen: dict[str, Any] = {}

    @mcp.verify_token
    def verify(token: str) -> User:
        g.token_checked = True
        seen.update(realm=current_app.config["API_REALM"], agent=request.headers.get("User-Agent"),
                    path=request.path)
        return User(1, "ann")

    @mcp.tool
    def checked() -> bool:
        return bool(g.get("token_checked"))

    assert call(make_client, app, "t", "checked").result["content"][0]["text"] == "true"
    assert seen["realm"] == "billing" and seen["path"] == "/mcp"


def test_an_async_verify_token_and_user_loader_run_through_ensure_sync(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app)
    serve(mcp)

    @mcp.verify_token
    async def verify(token: str) -> Principal:
        return Principal(subject="5")

    @mcp.user_loader
    async def load(principal: Principal) -> User:
        return User(int(principal.subject), "eve")

    assert call(make_client, app, "t").result["structuredContent"]["user"] == "eve"


def test_token_verifier_keeps_working_beside_a_user_loader(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app)
    serve(mcp)
    mcp.token_verifier(lambda token: Principal(subject="3"))
    mcp.user_loader(lambda principal: User(3, "joe"))
    assert call(make_client, app, "t").result["structuredContent"] == {"subject": "3", "scopes": [], "user": "joe"}


# ---------------------------------------------------------------------- caching


def test_nothing_is_cached_by_default(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app)
    serve(mcp)
    calls: list[str] = []

    @mcp.verify_token
    def verify(token: str) -> User:
        calls.append(token)
        return User(1, "ann")

    for _ in range(3):
        assert call(make_client, app, "t").status_code == 200
    assert len(calls) == 3


def test_an_opt_in_cache_keys_by_hash_and_reloads_the_user(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app)
    serve(mcp)
    calls: list[str] = []
    loads: list[str] = []

    @mcp.verify_token(cache_ttl=30)
    def verify(token: str) -> User | None:
        calls.append(token)
        return User(1, "ann") if token == "ann-token" else None

    @mcp.user_loader
    def load(principal: Principal) -> User:
        loads.append(principal.subject)
        return User(int(principal.subject), "ann (reloaded)")

    clock = FakeClock()
    verifier = the_verifier(app)
    verifier.clock = clock
    assert call(make_client, app, "ann-token").result["structuredContent"]["user"] == "ann"
    assert call(make_client, app, "ann-token").result["structuredContent"]["user"] == "ann (reloaded)"
    assert calls == ["ann-token"] and loads == ["1"] and verifier.cache_hits == 1
    assert list(verifier._cache) == [token_hash("ann-token")]  # noqa: SLF001 - never the token itself
    for _ in range(2):  # refusals are not kept
        assert call(make_client, app, "bad-token").status_code == 401
    assert calls.count("bad-token") == 2
    clock.advance(31)
    call(make_client, app, "ann-token")
    assert calls.count("ann-token") == 2


def test_a_cached_answer_never_outlives_the_token(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app)
    serve(mcp)
    clock = FakeClock()

    @mcp.verify_token(cache_ttl=300)
    def verify(token: str) -> Principal:
        return Principal(subject="s", expires_at=clock() + 10)

    verifier = the_verifier(app)
    verifier.clock = clock
    assert call(make_client, app, "t").status_code == 200
    clock.advance(11)
    assert verifier._cached(token_hash("t"), clock()) is None  # noqa: SLF001


def test_a_cached_user_comes_back_through_flask_logins_user_loader(make_client: MakeClient) -> None:
    app = new_app(SECRET_KEY="x")
    manager = LoginManager(app)
    manager.user_loader(lambda user_id: User(int(user_id), f"user {user_id} from Flask-Login"))
    mcp = MCP(app)
    serve(mcp)
    mcp.verify_token(cache_ttl=60)(lambda token: User(9, "first"))
    assert call(make_client, app, "t").result["structuredContent"]["user"] == "first"
    assert call(make_client, app, "t").result["structuredContent"]["user"] == "user 9 from Flask-Login"


def test_a_cached_users_deletion_refuses_the_token(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app)
    serve(mcp)
    mcp.verify_token(cache_ttl=60)(lambda token: User(9, "gone soon"))
    mcp.user_loader(lambda principal: None)
    assert call(make_client, app, "t").status_code == 200
    assert call(make_client, app, "t").status_code == 401


def test_users_are_not_cached_without_a_way_to_load_them_again(make_client: MakeClient,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    app = new_app()
    mcp = MCP(app)
    serve(mcp)
    calls: list[str] = []

    @mcp.verify_token(cache_ttl=60)
    def verify(token: str) -> Account:
        calls.append(token)
        return Account(1)

    with caplog.at_level(logging.WARNING, "flask_mcp"):
        for _ in range(3):
            assert call(make_client, app, "t").status_code == 200
    assert len(calls) == 3
    assert sum("not cached" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("ttl", [0, -5, True, "60"])
def test_a_bad_cache_ttl_is_refused_at_registration(ttl: Any) -> None:
    mcp = MCP()
    with pytest.raises(ValueError, match="cache_ttl"):
        mcp.verify_token(cache_ttl=ttl)(lambda token: None)


# ---------------------------------------------------------------------- the warnings


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name == "flask_mcp"]


@pytest.mark.parametrize("how", ["verify_token", "token_verifier", "presence"])
def test_no_server_warning_for_tokens_the_app_hands_out(caplog: pytest.LogCaptureFixture, how: str) -> None:
    app = new_app(**({"MCP_TOKEN_VERIFIER": "presence"} if how == "presence" else {}))
    mcp = MCP()
    if how == "verify_token":
        mcp.verify_token(lambda token: None)
    elif how == "token_verifier":
        mcp.token_verifier(lambda token: None)
    with caplog.at_level(logging.WARNING, "flask_mcp"):
        mcp.init_app(app)
    assert not [m for m in warnings_of(caplog) if SERVERS_WARNING in m]


@pytest.mark.parametrize("config", [
    {"MCP_JWKS_URL": "https://auth.example.com/jwks.json", "MCP_JWT_ISSUER": "https://auth.example.com"},
    {"MCP_INTROSPECTION_URL": "https://auth.example.com/introspect"},
])
def test_the_server_warning_for_tokens_of_an_authorization_server(caplog: pytest.LogCaptureFixture,
                                                                 config: dict[str, str]) -> None:
    with caplog.at_level(logging.WARNING, "flask_mcp"):
        MCP(new_app(**config))
    assert [m for m in warnings_of(caplog) if SERVERS_WARNING in m]
    caplog.clear()
    with caplog.at_level(logging.WARNING, "flask_mcp"):
        MCP(new_app(MCP_AUTH_SERVERS=["https://auth.example.com"], **config))
    assert not [m for m in warnings_of(caplog) if SERVERS_WARNING in m]


def test_verify_token_does_not_turn_auth_on_but_says_so(make_client: MakeClient,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    app = Flask("left_off")
    app.config.update(MCP_BACKEND="memory://", TESTING=True)
    mcp = MCP()
    serve(mcp)
    mcp.verify_token(lambda token: User(1, "ann"))
    with caplog.at_level(logging.WARNING, "flask_mcp"):
        mcp.init_app(app)
    assert [m for m in warnings_of(caplog) if LEFT_OFF_WARNING in m]
    assert make_client(app).call_tool("whoami").status_code == 200  # no token needed: auth is off


@pytest.mark.parametrize("auth", [True, False])
def test_an_explicit_mcp_auth_is_not_warned_about(caplog: pytest.LogCaptureFixture, auth: bool) -> None:
    mcp = MCP()
    mcp.verify_token(lambda token: None)
    with caplog.at_level(logging.WARNING, "flask_mcp"):
        mcp.init_app(new_app(MCP_AUTH=auth))
    assert not [m for m in warnings_of(caplog) if LEFT_OFF_WARNING in m]


def test_registered_after_init_app_with_auth_unset_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    app = Flask("late")
    app.config.update(MCP_BACKEND="memory://", TESTING=True)
    mcp = MCP(app)
    with caplog.at_level(logging.WARNING, "flask_mcp"):
        mcp.verify_token(lambda token: None)
    assert [m for m in warnings_of(caplog) if LEFT_OFF_WARNING in m]


def test_ctx_user_is_loaded_where_no_request_loaded_it() -> None:
    """A task run on a Celery worker rebuilds its principal without the user:
    ``ctx.user`` asks ``@mcp.user_loader`` there, once per call."""
    from flask_mcp.protocol.request_info import RequestInfo
    from flask_mcp.protocol.versions import REVISIONS

    app = new_app()
    mcp = MCP(app)
    loads: list[str] = []

    @mcp.user_loader
    def load(principal: Principal) -> User:
        loads.append(principal.subject)
        return User(int(principal.subject), "worker-side")

    request_info = RequestInfo(revision=REVISIONS["2026-07-28"], method="tools/call", params={}, headers={},
                               principal="4", auth=Principal(subject="4"))
    with app.app_context():
        ctx = Context(request_info)
        assert ctx.user.name == "worker-side" and ctx.user.id == 4
    assert loads == ["4"]
    assert Context(RequestInfo(revision=REVISIONS["2026-07-28"], method="tools/call", params={},
                               headers={})).user is None
