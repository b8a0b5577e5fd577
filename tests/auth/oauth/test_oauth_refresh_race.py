"""Refresh-token rotation under concurrency (RFC 9700 §4.14.2): of two refreshes
racing with the same token exactly one wins, and the loser's reuse revokes the
whole family; a token whose record expired is a clean ``invalid_grant``.
Runs on SQLite and on the real Redis, through the Flask test client."""

from __future__ import annotations

import threading
import time
from typing import Any

import test_oauth
from flask import Flask
from flask.testing import FlaskClient
from oauth_fixtures import ClientSite
from test_oauth import RESOURCE, call, exchange, get_code, json_of
from werkzeug.test import TestResponse

from flask_mcp.auth import token_hash
from flask_mcp.auth.oauth import TokenRecord, oauth_server
from flask_mcp.auth.oauth.store import OAuthStore

# The OAuth tests' fixtures: the example app on SQLite and on Redis, a signed-in browser, the client's site.
app, browser, site = test_oauth.app, test_oauth.browser, test_oauth.site


def _first_tokens(browser: FlaskClient, site: ClientSite) -> tuple[str, dict[str, Any]]:
    client_id = site.add_client("host")
    code, verifier = get_code(browser, site, client_id)
    tokens = exchange(browser.application.test_client(), code=code, code_verifier=verifier, client_id=client_id,
                      redirect_uri=site.redirect_uri)
    assert tokens.status_code == 200, tokens.data
    return client_id, json_of(tokens)


def _refresh(app: Flask, client_id: str, refresh_token: str) -> TestResponse:
    return app.test_client().post("/oauth/token", data={
        "grant_type": "refresh_token", "client_id": client_id, "refresh_token": refresh_token, "resource": RESOURCE})


def test_two_racing_refreshes_with_one_token_give_one_pair_and_revoke_the_family(
        browser: FlaskClient, site: ClientSite) -> None:
    app = browser.application
    client_id, first = _first_tokens(browser, site)
    store: OAuthStore = oauth_server(app).store
    # Hold both requests right after they read the (not yet rotated) record, so
    # both pass the read-time check: only the atomic claim can tell them apart.
    both_read = threading.Barrier(2, timeout=10)
    read = store.token_by_refresh
    waited: set[str] = set()

    def token_by_refresh(refresh_hash: str) -> TokenRecord | None:
        record = read(refresh_hash)
        name = threading.current_thread().name
        if name.startswith("refresh-") and name not in waited:  # its first read: authenticate_refresh_token
            waited.add(name)
            both_read.wait()
        return record

    store.token_by_refresh = token_by_refresh  # type: ignore[method-assign]
    answers: list[Any] = [None, None]

    def run(i: int) -> None:
        answers[i] = _refresh(app, client_id, first["refresh_token"])

    threads = [threading.Thread(target=run, args=(i,), name=f"refresh-{i}") for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    store.token_by_refresh = read  # type: ignore[method-assign]
    assert not both_read.broken

    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [200, 400], [answer.data for answer in answers]
    winner = next(answer.json for answer in answers if answer.status_code == 200)
    loser = next(answer.json for answer in answers if answer.status_code == 400)
    assert loser["error"] == "invalid_grant"
    assert winner["refresh_token"] != first["refresh_token"]

    # The loser was a reuse: the whole family is revoked, the winner's new pair included.
    api = app.test_client()
    for access in (winner["access_token"], first["access_token"]):
        refused = call(api, access)
        assert refused.status_code == 401 and "revoked" in json_of(refused)["error"]["message"]
    for refresh in (winner["refresh_token"], first["refresh_token"]):
        again = _refresh(app, client_id, refresh)
        assert again.status_code == 400 and json_of(again)["error"] == "invalid_grant"


def test_a_refresh_token_is_claimed_once(browser: FlaskClient, site: ClientSite) -> None:
    _, first = _first_tokens(browser, site)
    store = oauth_server(browser.application).store
    refresh_hash = token_hash(first["refresh_token"])
    assert store.claim_rotation(refresh_hash) is True
    assert store.claim_rotation(refresh_hash) is False
    assert store.claim_rotation(token_hash("never-issued")) is False


def _expired_record(store: Any, client_id: str, refresh_token: str) -> TokenRecord:
    now = time.time()
    record = TokenRecord(access_hash=token_hash("expired-access-" + refresh_token),
                         refresh_hash=token_hash(refresh_token), family="expired-family-" + refresh_token,
                         client_id=client_id, user_id="alice", scope="books:read", resource=RESOURCE,
                         issued_at=now - 7200, expires_at=now - 3600, refresh_expires_at=now - 1)
    store.save_token(record, "host")
    return record


def test_a_refresh_with_an_expired_token_is_invalid_grant(browser: FlaskClient, site: ClientSite) -> None:
    client_id, _ = _first_tokens(browser, site)
    store = oauth_server(browser.application).store
    _expired_record(store, client_id, "expired-refresh-token")
    answer = _refresh(browser.application, client_id, "expired-refresh-token")
    assert answer.status_code == 400 and json_of(answer)["error"] == "invalid_grant", answer.data


def test_a_token_whose_redis_hash_expired_is_invalid_grant_and_stays_gone(
        browser: FlaskClient, site: ClientSite) -> None:
    """Redis expired the token's hash while its refresh index still lived: the
    refresh is refused, and neither the claim nor a family revocation brings
    the hash back holding only a flag (which used to turn into a 500)."""
    client_id, _ = _first_tokens(browser, site)
    store = oauth_server(browser.application).store
    record = _expired_record(store, client_id, "half-expired-refresh-token")
    redis = getattr(store, "redis", None)
    if redis is None:  # SQLite keeps the row: covered by the test above
        assert store.token_by_refresh(record.refresh_hash) is not None
        return
    token_key = store._key("token", record.access_hash)
    redis.delete(token_key)  # what the TTL does
    assert redis.exists(store._key("refresh", record.refresh_hash))
    answer = _refresh(browser.application, client_id, "half-expired-refresh-token")
    assert answer.status_code == 400 and json_of(answer)["error"] == "invalid_grant", answer.data
    assert store.claim_rotation(record.refresh_hash) is False
    store.revoke_family(record.family)
    assert not redis.exists(token_key)
    assert store.token_by_refresh(record.refresh_hash) is None
