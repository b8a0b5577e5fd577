"""``MCP_OAUTH_STORE`` in the app's SQL database through its Flask-SQLAlchemy
``db`` (the OAuth suite, test_oauth.py, runs the whole server on a
``postgresql://`` store): the shorthand and the object reach the app's own
engine, and a ``db`` not initialised on the app is refused with the fix; and a
family revoked while a racing rotation saves its new pair loses that pair too
(PostgreSQL's READ COMMITTED, the interleaving forced with a row lock)."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy
from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from postgres_server import shared_postgres

from flask_mcp.auth.oauth.server import open_store
from flask_mcp.auth.oauth.sql_store import SqlOAuthStore
from flask_mcp.auth.oauth.store import TokenRecord
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


def _pair(name: str, family: str) -> TokenRecord:
    now = time.time()
    return TokenRecord(f"access-{name}", f"refresh-{name}", family, "client-1", "ann", "mcp", "https://mcp.example/mcp",
                       now, now + 600, now + 3600)


def test_a_family_revoked_while_a_rotation_saves_its_pair_loses_that_pair_too() -> None:
    """The interleaving that a plain UPDATE loses: the reuse's revocation has
    started (its snapshot taken: it waits here on a row lock another
    connection holds), the rotation saves its new pair and looks at the old
    token (not revoked yet, as the revocation has not committed), then the
    revocation goes on. The new pair must end revoked all the same."""
    url = shared_postgres().create_database("oauthrace")
    store = SqlOAuthStore(url)
    old, new = _pair("old", "family-1"), _pair("new", "family-1")
    store.save_token(old, "Desk Agent")
    assert store.claim_rotation("refresh-old")  # the winner's claim
    engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    revoker = threading.Thread(target=store.revoke_family, args=("family-1",), name="reuse")
    try:
        with engine.connect() as blocker:
            blocker.execute(sqlalchemy.text("SELECT 1 FROM flask_mcp_oauth_tokens WHERE access_hash = 'access-old' "
                                            "FOR UPDATE"))
            revoker.start()
            waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE%'"
            with engine.connect() as probe:
                deadline = time.monotonic() + 10
                while not probe.execute(sqlalchemy.text(waiting)).scalar():
                    assert time.monotonic() < deadline, "the revocation never reached the locked row"
                    time.sleep(0.02)
            store.save_token(new, "Desk Agent")  # the winner's new pair, committed while the revocation waits
            current = store.token_by_refresh("refresh-old")
            assert current is not None and not current.revoked  # so the winner's own check revokes nothing
            blocker.rollback()
        revoker.join(10)
        assert not revoker.is_alive()
        saved = store.token_by_access("access-new")
        assert saved is not None and saved.revoked
    finally:
        engine.dispose()
        store.database.engine.dispose()
