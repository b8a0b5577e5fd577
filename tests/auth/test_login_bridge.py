"""Flask-Login's ``current_user`` on the MCP endpoint is the caller the bearer
token names, never a cookie's user (flask_mcp/auth/login.py), over Flask's
test client with a real LoginManager: in tools (on the thread that runs them,
streamed or as a task, plain or ``async def``), in the hooks after
authentication, and not in the app's own views; the endpoint neither reads nor
sets a session cookie."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import flask_login
import pytest
from conftest import validate_message
from flask import Flask, g, session
from flask.sessions import SecureCookieSessionInterface
from flask_login import LoginManager, current_user, login_user

from flask_mcp import MCP, Context
from flask_mcp.auth import Principal
from flask_mcp.auth.login import EndpointSessions
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]
TASKS = "io.modelcontextprotocol/tasks"


class User:
    """What Flask-Login asks of a user class (its UserMixin, written out: it ships no types)."""

    is_authenticated = True
    is_active = True
    is_anonymous = False

    def __init__(self, user_id: str, name: str) -> None:
        self.id = user_id
        self.name = name

    def get_id(self) -> str:
        return self.id


USERS = {"1": User("1", "ann"), "2": User("2", "bob")}
TOKENS = {"ann-token": "1", "bob-token": "2"}


def who() -> str:
    """What a function written against Flask-Login sees."""
    return str(current_user.name) if current_user.is_authenticated else "anonymous"


def build_app(*, auth: bool = True, verify: bool = True, **config: Any) -> tuple[Flask, MCP, list[str]]:
    """An app with Flask-Login (a login view that sets a permanent session and
    a remember cookie), its own API tokens, and tools that use current_user.
    The list records what the app's hooks saw on the endpoint."""
    app = Flask("login_bridge")
    app.config.update(SECRET_KEY="login-bridge-tests", MCP_AUTH=auth, MCP_BACKEND="memory://", TESTING=True,
                      MCP_TASK_POLL_INTERVAL_MS=50, **config)
    manager = LoginManager(app)

    manager.user_loader(USERS.get)

    @app.post("/login/<user_id>")
    def log_in(user_id: str) -> str:
        login_user(USERS[user_id], remember=True)
        session.permanent = True
        return "signed in"

    @app.get("/me")
    def me() -> str:
        return who()

    seen: list[str] = []

    @app.before_request
    def before() -> None:
        seen.append(f"before_request:{who()}")

    @app.after_request
    def after(response: Any) -> Any:
        seen.append(f"after_request:{who()}")
        return response

    @app.teardown_request
    def teardown(exc: BaseException | None) -> None:
        if threading.current_thread() is threading.main_thread():  # not the copies on the tool's thread
            seen.append(f"teardown_request:{who()}")

    mcp = MCP(app)
    if verify:
        @mcp.verify_token
        def check(token: str) -> User | None:
            return USERS.get(TOKENS.get(token, ""))

    @mcp.tool
    def whoami(ctx: Context) -> dict[str, Any]:
        """Who Flask-Login and the context say is calling, and on which thread."""
        user = ctx.user
        return {"current_user": who(), "ctx_user": user.name if user is not None else None}

    @mcp.tool
    def whoami_after_progress(ctx: Context) -> str:
        """Reports progress first, so the answer is an event stream."""
        ctx.report_progress(1, 2)
        return f"{who()} in {threading.current_thread().name}"

    @mcp.tool(task="optional")
    def whoami_as_task(ctx: Context) -> str:
        return f"{who()} in {threading.current_thread().name}"

    return app, mcp, seen


def client_for(make_client: MakeClient, app: Flask, token: str | None, version: str = "2026-07-28",
               **kwargs: Any) -> MCPTestClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = make_client(app, version, headers=headers, **kwargs)
    if version != "2026-07-28":
        client.initialize()
    return client


def sign_in(client: MCPTestClient, user_id: str) -> None:
    """Log in through the app's own login view: the test client keeps its cookies."""
    response = client.client.post(f"/login/{user_id}")
    assert response.status_code == 200
    assert client.client.get_cookie("session") is not None
    assert client.client.get_cookie("remember_token") is not None


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_in_a_tool_current_user_and_ctx_user_are_the_tokens_user(make_client: MakeClient, version: str) -> None:
    app, _, _ = build_app()
    client = client_for(make_client, app, "ann-token", version)
    result = client.call_tool("whoami").result["structuredContent"]
    assert result["current_user"] == "ann" and result["ctx_user"] == "ann"
    bob = client_for(make_client, app, "bob-token", version).call_tool("whoami").result["structuredContent"]
    assert bob["current_user"] == "bob"


def test_a_streamed_answer_keeps_the_caller(make_client: MakeClient) -> None:
    app, _, _ = build_app()
    client = client_for(make_client, app, "bob-token")
    response = client.call_tool("whoami_after_progress", meta={"progressToken": "p"})
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert [n["method"] for n in response.notifications] == ["notifications/progress"]
    assert response.result["content"][0]["text"] == "bob in flask-mcp-request"  # a thread of its own: carried


def test_a_task_thread_keeps_the_caller(make_client: MakeClient) -> None:
    app, _, _ = build_app()
    client = client_for(make_client, app, "ann-token", capabilities={"extensions": {TASKS: {}}})
    created = client.call_tool("whoami_as_task").result
    until = time.monotonic() + 5
    while (task := client.get_task(created["taskId"]).result)["status"] != "completed":
        assert time.monotonic() < until, task
        time.sleep(0.02)
    assert task["result"]["content"][0]["text"] == "ann in flask-mcp-task"


def test_a_cookie_alone_never_authenticates(make_client: MakeClient) -> None:
    app, _, _ = build_app()
    client = client_for(make_client, app, None)
    sign_in(client, "1")
    response = client.call_tool("whoami")
    assert response.status_code == 401
    assert "Set-Cookie" not in response.headers


def test_the_token_wins_over_another_users_cookie_and_no_cookie_is_set(make_client: MakeClient) -> None:
    app, _, _ = build_app()
    client = client_for(make_client, app, "ann-token")
    sign_in(client, "2")
    response = client.call_tool("whoami")
    assert response.result["structuredContent"]["current_user"] == "ann"
    assert "Set-Cookie" not in response.headers  # a permanent session would be refreshed on any other path
    assert client.client.get("/me").text == "bob"  # the app's own views still see the browser's user
    assert "Set-Cookie" in client.client.get("/me").headers


def test_without_authentication_the_endpoint_serves_nobody_even_with_a_cookie(make_client: MakeClient) -> None:
    app, _, _ = build_app(auth=False, REMEMBER_COOKIE_REFRESH_EACH_REQUEST=True)
    client = client_for(make_client, app, None)
    sign_in(client, "1")
    response = client.call_tool("whoami")
    assert response.result["structuredContent"] == {"current_user": "anonymous", "ctx_user": None}
    assert "Set-Cookie" not in response.headers
    assert client.client.get("/me").text == "ann"


def test_a_remember_cookie_alone_does_not_sign_the_caller_in(make_client: MakeClient) -> None:
    app, _, _ = build_app(auth=False)
    client = client_for(make_client, app, None)
    sign_in(client, "2")
    client.client.delete_cookie("session")  # what a browser keeps after its session cookie expired
    response = client.call_tool("whoami")
    assert response.result["structuredContent"]["current_user"] == "anonymous"
    assert "Set-Cookie" not in response.headers
    assert client.client.get("/me").text == "bob"  # elsewhere Flask-Login signs bob in from it


def test_which_hooks_see_the_caller(make_client: MakeClient) -> None:
    app, _, seen = build_app()
    client = client_for(make_client, app, "ann-token")
    sign_in(client, "2")
    seen.clear()
    client.call_tool("whoami")
    assert seen == ["before_request:anonymous", "after_request:ann", "teardown_request:ann"]
    seen.clear()
    client.client.get("/me")
    assert seen == ["before_request:bob", "after_request:bob", "teardown_request:bob"]


def test_an_app_context_kept_across_requests_does_not_keep_the_caller(make_client: MakeClient) -> None:
    """Tests and the CLI may push one app context for several requests: ``g``
    then outlives a request, and the next one must not inherit the caller."""
    app, _, _ = build_app()
    client = client_for(make_client, app, "ann-token")
    with app.app_context():
        assert client.call_tool("whoami").result["structuredContent"]["current_user"] == "ann"
        assert "_login_user" not in g
        assert client.client.get("/me").text == "anonymous"


def test_without_a_user_the_caller_is_anonymous_to_flask_login(make_client: MakeClient) -> None:
    """A verifier that returns a Principal, and no user loader: ctx.user is None."""
    app, mcp, _ = build_app(verify=False)
    mcp.token_verifier(lambda token: Principal(subject="service") if token == "service-token" else None)
    result = client_for(make_client, app, "service-token").call_tool("whoami").result["structuredContent"]
    assert result["current_user"] == "anonymous" and result["ctx_user"] is None


def test_a_user_loader_makes_a_principal_the_apps_user(make_client: MakeClient) -> None:
    app, mcp, _ = build_app(verify=False)
    mcp.token_verifier(lambda token: Principal(subject=token.removeprefix("sub-")))
    loaded: list[str] = []

    @mcp.user_loader
    def load(principal: Principal) -> User | None:
        loaded.append(principal.subject)
        return USERS.get(principal.subject)

    result = client_for(make_client, app, "sub-2").call_tool("whoami").result["structuredContent"]
    assert result["current_user"] == "bob" and result["ctx_user"] == "bob"
    assert loaded == ["2"]  # once for the request, though both current_user and ctx.user were read
    refused = client_for(make_client, app, "sub-9").call_tool("whoami")
    assert refused.status_code == 401
    assert refused.error["data"]["error"] == "invalid_token"
    validate_message("2026-07-28", None, refused.message)


def test_an_async_tool_sees_the_caller(make_client: MakeClient) -> None:
    app, mcp, _ = build_app()

    @mcp.tool
    async def whoami_async() -> str:
        return who()

    assert client_for(make_client, app, "bob-token").call_tool("whoami_async").result["content"][0]["text"] == "bob"


def test_a_session_interface_set_after_init_app_is_guarded_again(make_client: MakeClient,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    app, _, _ = build_app()
    assert isinstance(app.session_interface, EndpointSessions)
    app.session_interface = SecureCookieSessionInterface()  # as Flask-Session does when set up after flask-mcp
    client = client_for(make_client, app, "ann-token")
    sign_in(client, "2")
    with caplog.at_level("WARNING", "flask_mcp"):
        assert client.call_tool("whoami").result["structuredContent"]["current_user"] == "ann"
    assert any("session_interface was replaced" in r.getMessage() for r in caplog.records)
    assert isinstance(app.session_interface, EndpointSessions)
    assert "Set-Cookie" not in client.call_tool("whoami").headers


def test_a_login_manager_set_up_after_init_app_is_bridged_from_its_first_request(make_client: MakeClient) -> None:
    """Flask-Login set up after ``MCP(app)`` (an extension order factories
    often have): from the first request on, the app's ``before_request``
    hooks see nobody on the endpoint and the tool sees the token's user."""
    app = Flask("login_later")
    app.config.update(SECRET_KEY="login-later", MCP_AUTH=True, MCP_BACKEND="memory://", TESTING=True)
    mcp = MCP(app)
    mcp.verify_token(lambda token: USERS.get(TOKENS.get(token, "")))

    @mcp.tool
    def whoami() -> str:
        return who()

    seen: list[str] = []

    @app.before_request
    def before() -> None:
        seen.append(who())

    LoginManager(app).user_loader(USERS.get)

    @app.post("/login/<user_id>")
    def log_in(user_id: str) -> str:
        login_user(USERS[user_id], remember=True)
        return "signed in"

    client = make_client(app, "2026-07-28", headers={"Authorization": "Bearer ann-token"})
    sign_in(client, "2")
    seen.clear()
    assert client.call_tool("whoami").result["content"][0]["text"] == "ann"
    assert seen == ["anonymous"]
    assert client.client.get("/login/2").status_code == 405 and seen[-1] == "bob"  # elsewhere, the cookie's user


def test_flask_login_still_reads_the_user_where_we_put_it() -> None:
    """The one Flask-Login internal relied on (flask_mcp/auth/login.py): its
    current_user answers with g._login_user when set, without loading one.
    Run on the oldest and newest Flask-Login the project supports."""
    app = Flask("canary")
    app.config["SECRET_KEY"] = "canary"
    manager = LoginManager(app)
    manager.user_loader(lambda user_id: pytest.fail("the loader must not run"))
    with app.test_request_context(headers={"Cookie": "remember_token=1|x"}):
        g._login_user = USERS["1"]
        assert current_user._get_current_object() is USERS["1"]
    assert flask_login.__version__ >= "0.6.3"
