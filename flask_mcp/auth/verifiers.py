"""The token verifiers flask-mcp ships:

- :class:`PresenceVerifier`: any well-formed token is accepted and handed to
  the tools (``ctx.access_token``), which check it themselves;
- :class:`IntrospectionVerifier`: RFC 7662 token introspection against the
  authorization server (``requests``, pooled connections, timeouts, a TTL cache
  keyed by a hash of the token);
- :class:`JWTVerifier`: local validation of JWT access tokens against the
  authorization server's JWKS (``pip install flask-mcp[jwt]``).

:func:`verifier_from_settings` builds one from the ``MCP_*`` configuration.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..config import ConfigError, Settings
from .deadline import deadline, urllib3_pool_classes
from .jwks import JWKSCache
from .tokens import InvalidToken, Principal, TokenVerifier, VerifierUnavailable, as_verifier, token_hash


class PresenceVerifier:
    """Accepts any bearer token without checking it: the tools decide
    (``ctx.access_token``), e.g. by calling an upstream API with it. The
    subject is a hash of the token, so a legacy session belongs to one token;
    the principal has no scopes, so tools declaring scopes are refused."""

    def verify(self, token: str) -> Principal | None:
        return Principal(subject="token:" + token_hash(token)[:32], token=token)


def _audience(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(item for item in value if isinstance(item, str))
    return ()


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    """``scope`` (space-separated, RFC 7662 / RFC 9068) or ``scp`` (a list)."""
    value = claims.get("scope", claims.get("scp"))
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _check_audience(audience: tuple[str, ...], expected: str | None) -> None:
    if expected is not None and expected.rstrip("/") not in {a.rstrip("/") for a in audience}:
        raise InvalidToken(f"The access token was not issued for this server (audience {expected}).")


class _TTLCache:
    """Verification outcomes by token hash, each kept until its own deadline."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, Principal | str]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, now: float) -> Principal | str | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= now:
                del self._entries[key]
                return None
            return entry[1]

    def put(self, key: str, outcome: Principal | str, until: float, now: float) -> None:
        if until <= now:
            return
        with self._lock:
            self._entries[key] = (until, outcome)
            self._entries.move_to_end(key)
            if len(self._entries) > self.max_entries:
                for stale in [k for k, (deadline, _) in self._entries.items() if deadline <= now]:
                    del self._entries[stale]
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def _deadline_adapter(base: type[Any]) -> type[Any]:
    """requests' ``HTTPAdapter`` whose connections keep :func:`~flask_mcp.auth.deadline.deadline`."""

    class DeadlineAdapter(base):  # type: ignore[misc]
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            plain, secure = urllib3_pool_classes()
            self.poolmanager.pool_classes_by_scheme = {"http": plain, "https": secure}

    return DeadlineAdapter


class IntrospectionVerifier:
    """RFC 7662 token introspection.

    One pooled ``requests.Session``; every call over within ``timeout``
    seconds however slowly the answer arrives (an app's own ``session`` keeps
    its own timeouts, per read);
    answers cached for ``cache_ttl`` seconds (never past the token's ``exp``),
    keyed by a SHA-256 of the token, never the token itself. Inactive answers
    are cached too, so a revocation is seen at most ``cache_ttl`` seconds late.
    The authorization server unreachable, slow or answering an error ->
    :class:`VerifierUnavailable` (the client gets 503, not 401).
    """

    def __init__(
        self,
        url: str,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        audience: str | None = None,
        timeout: float = 5.0,
        cache_ttl: float = 60.0,
        cache_size: int = 10_000,
        session: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            import requests
            from requests.adapters import HTTPAdapter
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("IntrospectionVerifier needs requests: pip install flask-mcp[introspection]") from exc
        self.url = url
        self.audience = audience
        self.timeout = timeout
        self.cache_ttl = cache_ttl
        self.clock = clock
        self._auth = (client_id, client_secret or "") if client_id else None
        if session is None:
            session = requests.Session()
            adapter = _deadline_adapter(HTTPAdapter)(pool_connections=1, pool_maxsize=32, max_retries=0)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
        self.session = session
        self._errors: tuple[type[Exception], ...] = (requests.RequestException, ValueError, OSError)
        self._cache = _TTLCache(cache_size)
        #: How many verifications the cache answered (for tests and metrics).
        self.cache_hits = 0

    def verify(self, token: str) -> Principal | None:
        key = token_hash(token)
        now = self.clock()
        cached = self._cache.get(key, now)
        if cached is not None:
            self.cache_hits += 1
            if isinstance(cached, str):
                raise InvalidToken(cached)
            return replace(cached, token=token)
        answer = self._introspect(token)
        try:
            principal = self._principal(answer, now)
        except InvalidToken as exc:
            self._cache.put(key, exc.description, now + self.cache_ttl, now)
            raise
        until = now + self.cache_ttl
        if principal.expires_at is not None:
            until = min(until, principal.expires_at)
        self._cache.put(key, principal, until, now)
        return replace(principal, token=token)

    def _introspect(self, token: str) -> dict[str, Any]:
        with deadline(self.timeout) as limit:
            try:
                return self._post(token)
            except self._errors as exc:
                why = f"over {self.timeout:g} s" if limit.expired else type(exc).__name__
                raise VerifierUnavailable(f"introspection endpoint {self.url}: {why}") from None

    def _post(self, token: str) -> dict[str, Any]:
        try:
            response = self.session.post(
                self.url,
                data={"token": token, "token_type_hint": "access_token"},
                auth=self._auth,
                headers={"Accept": "application/json"},
                timeout=(self.timeout, self.timeout),
                allow_redirects=False,
            )
            if response.status_code != 200:
                raise VerifierUnavailable(f"introspection endpoint {self.url} answered HTTP {response.status_code}")
            answer = response.json()
        except TimeoutError:
            raise  # the deadline passed between two steps: _introspect says so
        if not isinstance(answer, dict):
            raise VerifierUnavailable(f"introspection endpoint {self.url} answered something that is not an object")
        return answer

    def _principal(self, answer: dict[str, Any], now: float) -> Principal:
        if answer.get("active") is not True:
            raise InvalidToken("The access token is not active (unknown, revoked or expired).")
        expires_at = _number(answer.get("exp"))
        if expires_at is not None and expires_at <= now:
            raise InvalidToken("The access token has expired.")
        audience = _audience(answer.get("aud"))
        _check_audience(audience, self.audience)
        client_id = answer.get("client_id") if isinstance(answer.get("client_id"), str) else None
        subject = next((answer[k] for k in ("sub", "username") if isinstance(answer.get(k), str) and answer[k]),
                       client_id)
        if not subject:
            raise InvalidToken("The access token names no subject.")
        return Principal(subject=subject, scopes=_scopes(answer), expires_at=expires_at, client_id=client_id,
                         audience=audience, claims=answer)


class JWTVerifier:
    """Local validation of JWT access tokens (RFC 9068): signature against the
    keys at ``jwks_url`` (fetched with ``timeout``, cached ``jwks_lifespan``
    seconds, fetched again at once for a key id not seen yet, at most once per
    ``jwks_refresh_interval`` seconds: see :mod:`flask_mcp.auth.jwks`), ``exp``
    required, ``iss`` and ``aud`` checked when given."""

    def __init__(
        self,
        jwks_url: str,
        *,
        issuer: str | None = None,
        audience: str | None = None,
        algorithms: Sequence[str] = ("RS256", "ES256"),
        leeway: float = 30.0,
        timeout: float = 5.0,
        jwks_lifespan: float = 300.0,
        jwks_refresh_interval: float = 1.0,
    ) -> None:
        try:
            import jwt
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("JWTVerifier needs PyJWT: pip install flask-mcp[jwt]") from exc

        self._jwt = jwt
        self.issuer = issuer
        self.audience = audience
        self.algorithms = list(algorithms)
        self.leeway = leeway
        self.jwks = JWKSCache(jwks_url, timeout=timeout, lifespan=jwks_lifespan, refresh_interval=jwks_refresh_interval)

    def verify(self, token: str) -> Principal | None:
        jwt = self._jwt
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError:
            raise InvalidToken("The access token is not a JWT.") from None
        key = self.jwks.signing_key(kid if isinstance(kid, str) else None)
        options: dict[str, Any] = {"require": ["exp"], "verify_aud": self.audience is not None}
        try:
            claims = jwt.decode(token, key.key, algorithms=self.algorithms, audience=self.audience,
                                issuer=self.issuer, leeway=self.leeway, options=options)
        except jwt.ExpiredSignatureError:
            raise InvalidToken("The access token has expired.") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("The access token was not issued for this server (audience).") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("The access token was issued by another authorization server.") from None
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"The access token is invalid: {exc}") from None
        client_id = next((claims[k] for k in ("client_id", "azp") if isinstance(claims.get(k), str)), None)
        subject = claims.get("sub") if isinstance(claims.get("sub"), str) and claims.get("sub") else client_id
        if not subject:
            raise InvalidToken("The access token names no subject.")
        return Principal(subject=subject, scopes=_scopes(claims), expires_at=_number(claims.get("exp")),
                         client_id=client_id, audience=_audience(claims.get("aud")), claims=claims, token=token)


def verifier_from_settings(settings: Settings) -> TokenVerifier | None:
    """``MCP_TOKEN_VERIFIER`` (an object, a function, or ``"presence"``,
    ``"introspection"``, ``"jwt"``), else what ``MCP_INTROSPECTION_URL`` or
    ``MCP_JWKS_URL`` implies; ``None`` leaves it to ``@mcp.token_verifier``."""
    spec = settings.token_verifier
    if spec is None:
        spec = "introspection" if settings.introspection_url else "jwt" if settings.jwks_url else None
    if spec is None:
        return None
    audience = settings.auth_audience or settings.resource_url
    if spec == "presence":
        return PresenceVerifier()
    if spec == "introspection":
        if not settings.introspection_url:
            raise ConfigError("MCP_TOKEN_VERIFIER 'introspection' needs MCP_INTROSPECTION_URL")
        return IntrospectionVerifier(
            settings.introspection_url,
            client_id=settings.introspection_client_id,
            client_secret=settings.introspection_client_secret,
            audience=audience,
            timeout=settings.auth_timeout,
            cache_ttl=settings.auth_cache_ttl,
        )
    if spec == "jwt":
        if not settings.jwks_url:
            raise ConfigError("MCP_TOKEN_VERIFIER 'jwt' needs MCP_JWKS_URL")
        return JWTVerifier(settings.jwks_url, issuer=settings.jwt_issuer, audience=audience,
                           algorithms=settings.jwt_algorithms, timeout=settings.auth_timeout)
    if isinstance(spec, str):
        raise ConfigError(f"MCP_TOKEN_VERIFIER must be 'presence', 'introspection', 'jwt', an object with "
                          f"verify(token) or a function (got {spec!r})")
    try:
        return as_verifier(spec)
    except TypeError as exc:
        raise ConfigError(f"MCP_TOKEN_VERIFIER: {exc}") from None
