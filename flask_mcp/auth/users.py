"""The caller as the app's own user.

``@mcp.verify_token`` checks the app's own API tokens the way Flask-HTTPAuth's
``verify_token`` does: a function ``token -> user | Principal | None``. A user
object it returns becomes ``ctx.user`` (and Flask-Login's ``current_user``),
and the caller's subject is its Flask-Login ``get_id()``. ``@mcp.user_loader``
turns the :class:`Principal` of any verifier into the app's user. Both run
inside the request context (``g``, ``current_app``, the app's database
session), an ``async def`` one through the app's ``ensure_sync``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..coroutines import synced
from .login import login_manager_loader
from .tokens import InvalidToken, Principal, token_hash

logger = logging.getLogger("flask_mcp")

#: Loads the app's user for a principal; ``None``: no such user.
UserLoader = Callable[[Principal], Any]


def subject_of(user: Any) -> str:
    """The subject of a caller ``@mcp.verify_token`` returned as a user object:
    Flask-Login's ``get_id()`` (what its ``user_loader`` takes back), else the
    object's ``id``, as a string."""
    get_id = getattr(user, "get_id", None)
    value = get_id() if callable(get_id) else getattr(user, "id", None)
    if value is None:
        raise TypeError(
            f"@mcp.verify_token returned a {type(user).__name__}, which has neither get_id() nor an id: "
            "return a Principal, or a user with get_id() (Flask-Login's UserMixin) or an id."
        )
    return str(value)


def principal_for(answer: Any) -> Principal | None:
    """What ``@mcp.verify_token`` returned, as a principal: ``None`` refuses
    the token, a :class:`Principal` is taken as it is, anything else is the
    app's user."""
    if answer is None or isinstance(answer, Principal):
        return answer
    return Principal(subject=subject_of(answer), user=answer)


def cached_user_loader(own: UserLoader | None) -> UserLoader | None:
    """What loads the user again for a cached ``verify_token`` answer: the
    app's ``@mcp.user_loader``, else Flask-Login's ``user_loader`` (the subject
    is the user's ``get_id()``), else nothing."""
    if own is not None:
        return own
    flask_login_loader = login_manager_loader()
    if flask_login_loader is None:
        return None
    return lambda principal: flask_login_loader(principal.subject)


class UserTokens:
    """``@mcp.verify_token``: the app's own token check as a :class:`TokenVerifier`.

    Nothing is cached unless ``cache_ttl`` (seconds) is given: then an accepted
    token's principal is kept that long (never past its ``expires_at``), keyed
    by a SHA-256 of the token, never the token; refusals are not kept, so a new
    token works at once and a revoked one stops at most ``cache_ttl`` seconds
    late. The user object itself is never kept across requests (an ORM object
    belongs to its request's database session): on a cached answer it is loaded
    again by ``reload()``'s loader (``@mcp.user_loader``, else Flask-Login's
    ``user_loader`` with the subject). Without either, answers that are users
    are not cached, and the log says so once.
    """

    def __init__(
        self,
        fn: Callable[[str], Any],
        *,
        cache_ttl: float | None = None,
        reload: Callable[[], UserLoader | None] = lambda: None,
        clock: Callable[[], float] = time.time,
        cache_size: int = 10_000,
    ) -> None:
        if cache_ttl is not None and (isinstance(cache_ttl, bool) or not isinstance(cache_ttl, int | float)
                                      or not cache_ttl > 0):
            raise ValueError(f"verify_token(cache_ttl=...) must be a positive number of seconds (got {cache_ttl!r})")
        self.fn: Callable[[str], Any] = synced(fn, "@mcp.verify_token")
        self.cache_ttl = cache_ttl
        self.reload = reload
        self.clock = clock
        self.cache_size = cache_size
        #: token hash -> (deadline, principal without token and user, whether it was a user)
        self._cache: OrderedDict[str, tuple[float, Principal, bool]] = OrderedDict()
        self._lock = threading.Lock()
        self._warned = False
        #: How many verifications the cache answered (for tests and metrics).
        self.cache_hits = 0

    def verify(self, token: str) -> Principal | None:
        if not self.cache_ttl:
            return principal_for(self.fn(token))
        key, now = token_hash(token), self.clock()
        hit = self._cached(key, now)
        if hit is not None:
            principal, was_user = hit
            loader = self.reload() if was_user else None
            if not was_user or loader is not None:
                self.cache_hits += 1
                if loader is None:
                    return replace(principal, token=token)
                user = loader(principal)
                if user is None:
                    raise InvalidToken("The access token's user is not known to this app.")
                return replace(principal, token=token, user=user)
        answer = principal_for(self.fn(token))
        if answer is not None:
            self._keep(key, answer, now)
        return answer

    def _cached(self, key: str, now: float) -> tuple[Principal, bool] | None:
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                return None
            if entry[0] <= now:
                del self._cache[key]
                return None
            return entry[1], entry[2]

    def _keep(self, key: str, principal: Principal, now: float) -> None:
        was_user = principal.user is not None
        if was_user and self.reload() is None:
            if not self._warned:
                self._warned = True
                logger.warning("verify_token(cache_ttl=...) returned a user, but no @mcp.user_loader (nor a "
                               "Flask-Login user_loader) can load it again for a cached answer: not cached.")
            return
        until = now + float(self.cache_ttl or 0)
        if principal.expires_at is not None:
            until = min(until, principal.expires_at)
        if until <= now:
            return
        with self._lock:
            self._cache[key] = (until, replace(principal, token="", user=None), was_user)
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
