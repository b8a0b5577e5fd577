"""The bookshop's members' corner: an MCP server that is its own OAuth
authorization server, so an AI host "connects" with the members' own
sign-in (a Flask-Login form) and a consent page. See docs/oauth.md.

    FLASK_SECRET_KEY=change-me flask --app example.oauth_app run
    gunicorn example.oauth_app:app

Members and passwords come from FLASK_MEMBERS ("alice:wonderland,bob:builder");
any MCP setting can come from the environment as FLASK_MCP_*.
"""

from __future__ import annotations

import hmac
import os

from flask import Flask, redirect, render_template_string, request
from flask_login import LoginManager, UserMixin, current_user, login_user

from flask_mcp import MCP, Context

login_manager = LoginManager()
login_manager.login_view = "login"  # where /oauth/authorize sends visitors who are not signed in
mcp = MCP(name="members", version="1.0.0", title="Corner Bookshop members")
MEMBERS = dict(pair.split(":", 1) for pair in os.environ.get("FLASK_MEMBERS", "alice:wonderland").split(","))


class Member(UserMixin):
    def __init__(self, name: str) -> None:
        self.id = name


@login_manager.user_loader
def load_member(name: str) -> Member | None:
    return Member(name) if name in MEMBERS else None


LOGIN_PAGE = """<!doctype html><title>Sign in</title><h1>Sign in to the Corner Bookshop</h1>
{% if error %}<p role="alert">{{ error }}</p>{% endif %}
<form method="post"><input type="hidden" name="next" value="{{ next }}">
<label>Name <input name="username" id="username" autocomplete="username"></label>
<label>Password <input name="password" id="password" type="password" autocomplete="current-password"></label>
<button type="submit" id="sign-in">Sign in</button></form>"""


def _safe_next(target: str) -> str:
    """Only paths on this site: an open redirect would hand the sign-in to anyone."""
    local = target.startswith("/") and not target.startswith(("//", "/\\"))
    return target if local else "/"


def login() -> object:
    next_url = request.values.get("next", "/")
    if request.method == "POST":
        name = request.form.get("username", "")
        password = MEMBERS.get(name)
        if password is not None and hmac.compare_digest(password, request.form.get("password", "")):
            login_user(Member(name))
            return redirect(_safe_next(next_url))
        return render_template_string(LOGIN_PAGE, error="Wrong name or password.", next=next_url), 401
    if current_user.is_authenticated:
        return redirect(_safe_next(next_url))
    return render_template_string(LOGIN_PAGE, error=None, next=next_url)



@mcp.tool(scopes=["books:read"])
def whoami(ctx: Context) -> str:
    """The member this host acts for."""
    principal = ctx.principal
    return principal.subject if principal else "nobody"


@mcp.tool(scopes=["books:read"])
def reserve(isbn: str, ctx: Context) -> str:
    """Reserve a book for the signed-in member."""
    member = ctx.principal.subject if ctx.principal else "nobody"
    return f"Reserved {isbn} for {member}."


def create_app(config: dict[str, object] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get("FLASK_SECRET_KEY", "dev-only-secret"),
        MCP_AUTH=True,
        MCP_OAUTH=True,  # the app issues its own tokens (flask-mcp[oauth])
        # what the consent and connected-apps pages say each scope lets an app do
        MCP_OAUTH_SCOPE_DESCRIPTIONS={"books:read": "See your account and reserve books for you"},
    )
    app.config.from_prefixed_env()
    app.config.update(config or {})
    login_manager.init_app(app)
    app.add_url_rule("/login", "login", login, methods=["GET", "POST"])
    app.add_url_rule("/", "home", lambda: redirect("/oauth/connections"))  # the member's connected apps
    mcp.init_app(app)
    return app


app = create_app()
