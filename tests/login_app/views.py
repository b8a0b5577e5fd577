"""The app's own browser login (Flask-Login, a session cookie), and how
both Flask-Login and flask-mcp find a user: by id from the session, by API
token from an MCP request."""

from __future__ import annotations

from flask import Blueprint, abort, request
from flask_login import current_user, login_user

from .extensions import db, login_manager, mcp
from .models import User

bp = Blueprint("accounts", __name__)


def load_user(user_id: str) -> User | None:
    return db.session.get(User, int(user_id))


login_manager.user_loader(load_user)  # called, not decorated: flask_login ships no types for mypy


@mcp.verify_token
def verify_token(token: str) -> User | None:
    return User.check_token(token)


@bp.post("/login")
def login() -> str:
    user = db.session.scalar(db.select(User).where(User.name == request.form["name"]))
    if user is None or not user.check_password(request.form["password"]):
        abort(401)
    login_user(user, remember=True)
    return f"signed in as {user.name}"


@bp.get("/me")
def me() -> str:
    return str(current_user.name) if current_user.is_authenticated else "anonymous"
