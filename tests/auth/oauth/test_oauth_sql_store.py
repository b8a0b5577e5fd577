"""``MCP_OAUTH_STORE`` in the app's SQL database through its Flask-SQLAlchemy
``db`` (the OAuth suite, test_oauth.py, runs the whole server on a
``postgresql://`` store): the shorthand and the object reach the app's own
engine, and a ``db`` not initialised on the app is refused with the fix."""

from __future__ import annotations

import pytest
from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from postgres_server import shared_postgres

from flask_mcp.auth.oauth.server import open_store
from flask_mcp.auth.oauth.sql_store import SqlOAuthStore
from flask_mcp.config import ConfigError


@pytest.mark.parametrize("shorthand", [True, False])
def test_oauth_store_in_the_apps_flask_sqlalchemy_database(shorthand: bool) -> None:
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = shared_postgres().create_database("oauthdb")
    db = SQLAlchemy()
    db.init_app(app)
    store = open_store(app, "flask-sqlalchemy" if shorthand else db)
    assert isinstance(store, SqlOAuthStore)
    with app.app_context():
        assert store.database.engine is db.engine  # the app's pool, not a second one
    store.save_client("client-1", {"client_name": "Desk Agent", "redirect_uris": ["https://a.example/cb"]})
    assert store.client_document("client-1") == {"client_name": "Desk Agent", "redirect_uris": ["https://a.example/cb"]}
    assert store.client_document("client-2") is None
    with app.app_context():
        db.engine.dispose()


def test_oauth_store_refuses_a_flask_sqlalchemy_db_the_app_has_not_initialised() -> None:
    app = Flask(__name__)
    with pytest.raises(ConfigError, match="db.init_app"):
        open_store(app, SQLAlchemy())
    with pytest.raises(ConfigError, match="db.init_app"):
        open_store(app, "flask-sqlalchemy")
