"""The application factory of the fixture app tests/e2e/test_e2e_login.py
serves under gunicorn (``tests.login_app.factory:create_app()``): Flask-Login,
Flask-SQLAlchemy and the app's own API tokens, the layout of
docs/recipe-flask-login.md. ``LOGIN_APP_DATABASE`` names the SQLite file."""

from __future__ import annotations

import os
from typing import Any

from flask import Flask
from werkzeug.security import generate_password_hash

from . import tools, views  # noqa: F401 - registers the tools, the token check and the login view
from .extensions import db, login_manager, mcp
from .models import User


def create_app(config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get("LOGIN_APP_SECRET", "login-app-tests"),
        SQLALCHEMY_DATABASE_URI="sqlite:///" + os.environ.get("LOGIN_APP_DATABASE", "/nonexistent/set-me.sqlite3"),
        MCP_AUTH=True,
    )
    app.config.from_prefixed_env()  # FLASK_MCP_BACKEND: the test's SQLite sessions, shared by the workers
    app.config.update(config or {})
    db.init_app(app)
    login_manager.init_app(app)
    mcp.init_app(app)
    app.register_blueprint(views.bp)
    return app


def seed(app: Flask, users: dict[str, tuple[str, str]]) -> None:
    """Create the tables and the users: name -> (password, API token)."""
    with app.app_context():
        db.create_all()
        for name, (password, token) in users.items():
            db.session.add(User(name=name, password_hash=generate_password_hash(password),
                                token_hash=User.hash_token(token)))
        db.session.commit()
