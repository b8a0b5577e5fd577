"""The :class:`~flask_mcp.auth.TokenVerifier` for the tokens this app's own
authorization server issues: a look-up of the token's hash in the store, so
a revocation takes effect on the next request. Each token's use is recorded
(the "connected apps" page's "last used"), at most once a minute per token
and process, so a busy client does not write on every request."""

from __future__ import annotations

import logging
import threading
import time

from ..tokens import InvalidToken, Principal, token_hash
from .store import OAuthStore

logger = logging.getLogger("flask_mcp")


class OAuthTokenVerifier:
    """Opaque access tokens, checked against :class:`~flask_mcp.auth.oauth.store.OAuthStore`."""

    #: Seconds between two records of one token's use (by one process).
    use_resolution = 60.0

    def __init__(self, store: OAuthStore) -> None:
        self.store = store
        self._recorded: dict[str, float] = {}
        self._lock = threading.Lock()

    def verify(self, token: str) -> Principal | None:
        record = self.store.token_by_access(token_hash(token))
        if record is None:
            return None
        if record.revoked:
            raise InvalidToken("The access token was revoked.")
        if record.expires_at <= time.time():
            raise InvalidToken("The access token has expired.")
        self._record_use(record.access_hash)
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

    def _record_use(self, access_hash: str) -> None:
        now = time.time()
        with self._lock:
            if now - self._recorded.get(access_hash, float("-inf")) < self.use_resolution:
                return
            self._recorded[access_hash] = now
            if len(self._recorded) > 10000:
                self._recorded.pop(next(iter(self._recorded)))
        try:
            self.store.mark_used(access_hash, now)
        except Exception:  # bookkeeping: a failed write must not refuse a valid token
            logger.warning("OAuth: could not record a token's use", exc_info=True)
