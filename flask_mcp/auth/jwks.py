"""The authorization server's signing keys (its JWKS), as :class:`JWTVerifier`
needs them.

Fetched when first needed and again once ``lifespan`` has passed; fetched
again at once when a token names a key id the set does not hold, because
that is what a key rotation looks like (a fixed cooldown here would refuse
every token of the new key, for that long, with ``401 invalid_token``, which
sends clients to get a new token that fails the same way). However many
unknown key ids arrive, forged ones included, this process fetches at most
once per ``refresh_interval`` seconds; concurrent callers share one fetch,
which is over within ``timeout`` seconds however slowly the JWKS arrives.

A key id the set lacks is an invalid token (401) once the set has answered:
after a fetch that found no such key, or within ``refresh_interval`` of the
last successful fetch (the set is that fresh; the next unknown key id after
it fetches again, so a key rotated in is accepted within about a second).
Only while the set cannot be fetched is the token uncheckable:
:class:`~flask_mcp.auth.VerifierUnavailable` (503) with the seconds after
which a retry can succeed.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse, urlsplit

from .deadline import DeadlineHTTPConnection, DeadlineHTTPSConnection, deadline
from .tokens import InvalidToken, VerifierUnavailable

logger = logging.getLogger("flask_mcp")

#: A JWKS is a few keys; anything this big is not one.
MAX_JWKS_BYTES = 1024 * 1024

class JWKSCache:
    """The keys at ``url``, by key id, kept ``lifespan`` seconds; at most one
    fetch per ``refresh_interval`` seconds, each bounded by ``timeout``."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 5.0,
        lifespan: float = 300.0,
        refresh_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if urlparse(url).scheme.lower() not in ("http", "https"):
            raise ValueError(f"The JWKS URL must be http:// or https:// (got {url!r}).")
        import jwt  # the jwt extra, checked by JWTVerifier

        self._jwt = jwt
        self.url = url
        self.timeout = timeout
        self.lifespan = lifespan
        self.refresh_interval = refresh_interval
        self.clock = clock
        #: Signing keys by key id (``None``: a key published without one).
        self._keys: dict[str | None, Any] = {}
        self._fetched_at: float | None = None
        self._attempted_at = -math.inf
        #: Whether the last fetch succeeded: within the interval after it, an
        #: unknown key id is the set's answer (401), after a failure it is not (503).
        self._last_fetch_ok = False
        #: Counts successful fetches: a caller that waited for another's fetch
        #: sees it changed and does not fetch again.
        self._generation = 0
        self._fetching = threading.Lock()
        #: How many times the JWKS was requested (for tests and metrics).
        self.fetches = 0

    def signing_key(self, kid: str | None) -> Any:
        """The key (a PyJWT ``PyJWK``) that signed a token with header ``kid``."""
        generation = self._generation
        key = self._find(kid)
        if key is not None:
            return key
        try:
            self._refresh(generation)
        except VerifierUnavailable:
            # The set could not be fetched: a key it held is still the authorization
            # server's last word, so a token it signed keeps working through the outage.
            stale = self._find(kid, stale=True)
            if stale is None:
                raise
            logger.warning("JWKS at %s unreachable: serving its previous keys", self.url)
            return stale
        key = self._find(kid)
        if key is None:
            raise InvalidToken("The access token is not signed by a key the authorization server publishes.")
        return key

    def _find(self, kid: str | None, *, stale: bool = False) -> Any:
        """The key for ``kid`` in the current set, if the set is within its
        lifespan (or, with ``stale``, whatever its age)."""
        fetched_at = self._fetched_at
        if fetched_at is None or (not stale and self.clock() - fetched_at >= self.lifespan):
            return None
        keys = self._keys
        if kid is None and len(keys) == 1:  # a token without kid, and one key to try
            return next(iter(keys.values()))
        return keys.get(kid)

    def _refresh(self, seen: int) -> None:
        """Fetch the set again, unless a fetch finished since generation ``seen``
        (then its keys are the newest there are)."""
        if not self._fetching.acquire(timeout=self.timeout + 1):
            raise VerifierUnavailable(f"JWKS at {self.url}: a fetch is taking too long", retry_after=1)
        try:
            if self._generation != seen:
                return
            wait = self._attempted_at + self.refresh_interval - self.clock()
            if wait > 0:  # fetched a moment ago: the next fetch is allowed in ``wait`` seconds
                if self._last_fetch_ok:
                    return  # the set answered that recently: the caller's key id is not in it (401)
                raise VerifierUnavailable(
                    f"JWKS at {self.url}: could not be fetched less than {self.refresh_interval} s ago",
                    retry_after=max(1, math.ceil(wait)),
                )
            self._attempted_at = self.clock()
            self._last_fetch_ok = False
            keys = self._fetch()
            self._last_fetch_ok = True
            # Only a fetch that succeeded is news for the callers waiting on this one:
            # after a failure they find the interval not yet over and answer 503 too,
            # rather than 401 for a key the server may well publish.
            self._keys = keys
            self._fetched_at = self.clock()
            self._generation += 1
        finally:
            self._fetching.release()

    def _fetch(self) -> dict[str | None, Any]:
        jwt = self._jwt
        self.fetches += 1
        try:
            document = json.loads(self._download())
            if not isinstance(document, dict):
                raise ValueError("the JWKS is not a JSON object")
            keys = jwt.PyJWKSet.from_dict(document).keys
        except (OSError, ValueError, http.client.HTTPException, jwt.PyJWTError) as exc:  # timeouts are OSErrors
            raise VerifierUnavailable(
                f"JWKS at {self.url}: {type(exc).__name__}", retry_after=max(1, math.ceil(self.refresh_interval))
            ) from None
        signing = {key.key_id: key for key in keys if key.public_key_use in ("sig", None)}
        if not signing:
            raise VerifierUnavailable(f"JWKS at {self.url} holds no signing key", retry_after=5)
        return signing

    def _download(self) -> bytes:
        """GET the JWKS, all of it within ``timeout`` seconds however slowly it
        arrives (:mod:`flask_mcp.auth.deadline`), at most ``MAX_JWKS_BYTES``."""
        parts = urlsplit(self.url)
        secure = parts.scheme.lower() == "https"
        connection_class = DeadlineHTTPSConnection if secure else DeadlineHTTPConnection
        with deadline(self.timeout) as limit:
            connection = connection_class(parts.hostname or "", parts.port, timeout=self.timeout)
            response: http.client.HTTPResponse | None = None
            try:
                target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                connection.request("GET", target, headers={"Accept": "application/json", "User-Agent": "flask-mcp"})
                response = connection.getresponse()
                if response.status != 200:
                    raise ValueError(f"HTTP {response.status}")
                body = response.read(MAX_JWKS_BYTES + 1)
                if limit.expired:  # cut short by the deadline: what arrived is not the whole set
                    raise TimeoutError(f"took more than {self.timeout:g} s")
            except (OSError, http.client.HTTPException) as exc:
                if limit.expired:
                    raise TimeoutError(f"took more than {self.timeout:g} s") from exc
                raise
            finally:
                if response is not None:  # holds the socket when the server said Connection: close
                    response.close()
                connection.close()
        if len(body) > MAX_JWKS_BYTES:
            raise ValueError(f"the JWKS is over {MAX_JWKS_BYTES} bytes")
        return body
