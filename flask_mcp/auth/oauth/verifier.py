"""The :class:`~flask_mcp.auth.TokenVerifier` for the tokens this app's own
authorization server issues: a look-up of the token's hash in the store, so
a revocation takes effect on the next request."""

from __future__ import annotations

import time

from ..tokens import InvalidToken, Principal, token_hash
from .store import OAuthStore


class OAuthTokenVerifier:
    """Opaque access tokens, checked against :class:`~flask_mcp.auth.oauth.store.OAuthStore`."""

    def __init__(self, store: OAuthStore) -> None:
        self.store = store

    def verify(self, token: str) -> Principal | None:
        record = self.store.token_by_access(token_hash(token))
        if record is None:
            return None
        if record.revoked:
            raise InvalidToken("The access token was revoked.")
        if record.expires_at <= time.time():
            raise InvalidToken("The access token has expired.")
        return Principal(
            subject=record.user_id,
            scopes=frozenset(record.scope.split()),
            expires_at=record.expires_at,
            client_id=record.client_id,
            audience=(record.resource,),
            claims={"sub": record.user_id, "client_id": record.client_id, "scope": record.scope,
                    "aud": record.resource, "exp": record.expires_at},
            token=token,
        )
