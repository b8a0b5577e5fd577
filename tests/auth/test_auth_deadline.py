"""The JWKS and token introspection are fetched within the verifier's
timeout however slowly the authorization server sends its headers or body
(flask_mcp/auth/deadline.py): a real server on loopback sends one byte every
half second (tests/oauth_fixtures.py), and the caller gets 503's exception
within the timeout plus one second."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from oauth_fixtures import TricklingSite

from flask_mcp.auth import VerifierUnavailable
from flask_mcp.auth.deadline import deadline
from flask_mcp.auth.jwks import JWKSCache
from flask_mcp.auth.verifiers import IntrospectionVerifier

TIMEOUT = 1.5
SLACK = 1.0  # the brief's bound past the timeout; the watchdog, not the test's speed, enforces it


@pytest.fixture(params=["headers", "body"])
def trickling(request: pytest.FixtureRequest) -> Iterator[TricklingSite]:
    server = TricklingSite(request.param).start()
    yield server
    server.stop()


def test_a_trickled_jwks_is_a_503_within_the_timeout(trickling: TricklingSite) -> None:
    pytest.importorskip("jwt")
    cache = JWKSCache(trickling.base + "/jwks.json", timeout=TIMEOUT)
    started = time.monotonic()
    with pytest.raises(VerifierUnavailable) as refused:
        cache.signing_key("any")
    elapsed = time.monotonic() - started

    assert trickling.requests == 1
    assert "TimeoutError" in str(refused.value)
    assert elapsed < TIMEOUT + SLACK, elapsed


def test_a_trickled_introspection_is_a_503_within_the_timeout(trickling: TricklingSite) -> None:
    pytest.importorskip("requests")
    verifier = IntrospectionVerifier(trickling.base + "/introspect", timeout=TIMEOUT)
    started = time.monotonic()
    try:
        with pytest.raises(VerifierUnavailable) as refused:
            verifier.verify("a-token")
        elapsed = time.monotonic() - started
    finally:
        verifier.session.close()

    assert trickling.requests == 1
    assert f"over {TIMEOUT:g} s" in str(refused.value)
    assert elapsed < TIMEOUT + SLACK, elapsed


def test_a_deadline_that_passed_refuses_to_start_anything() -> None:
    with deadline(0.0) as limit, pytest.raises(TimeoutError):
        limit.remaining()
    assert limit.expired
