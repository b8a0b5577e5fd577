"""Who the caller is: the :class:`Principal` a :class:`TokenVerifier` makes of
a bearer token, the errors a verifier raises, and the scope hierarchy a
principal's scopes are read by. A verifier runs inside the request (an ``async def``
one through the app's ``ensure_sync``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..coroutines import is_async, synced


def token_hash(token: str) -> str:
    """A stable, non-reversible name for a token (cache keys, subjects): never the token."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """The authenticated caller: what a :class:`TokenVerifier` learned from a token.

    ``subject`` names the caller (sessions are bound to it); ``expires_at`` is
    when the token stops working, in seconds since the epoch (a float, as
    ``time.time()`` returns; ``None``: the verifier does not say); ``audience``
    is the token's ``aud`` (``None`` when the verifier does not report it: the
    check is then the verifier's job); ``claims`` holds everything else the
    verifier saw. ``token`` is the raw bearer token, for tools that forward or
    check it themselves; ``user`` is the app's own user object for this caller
    (``@mcp.verify_token`` or ``@mcp.user_loader``), what ``ctx.user`` and
    Flask-Login's ``current_user`` answer with. Both are left out of ``repr``
    and comparisons.
    """

    subject: str
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    client_id: str | None = None
    audience: tuple[str, ...] | None = None
    claims: Mapping[str, Any] = field(default_factory=dict)
    token: str = field(default="", repr=False, compare=False)
    user: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scopes", frozenset(self.scopes))
        if self.audience is not None:
            object.__setattr__(self, "audience", tuple(self.audience))

    def has_scope(self, required: str) -> bool:
        """Whether the token grants ``required``, directly or through a broader scope."""
        return scope_granted(self.scopes, required)

    def has_scopes(self, required: Iterable[str]) -> bool:
        return all(self.has_scope(scope) for scope in required)


@runtime_checkable
class TokenVerifier(Protocol):
    """Turns a bearer token into a :class:`Principal`.

    Return ``None`` (or raise :class:`InvalidToken` with a reason) to reject the
    token: the client gets ``401``. Raise :class:`VerifierUnavailable` when the
    decision cannot be made right now (the authorization server is down): the
    client gets ``503``. A plain function ``token -> Principal | None`` works
    too (``@mcp.token_verifier``).
    """

    def verify(self, token: str) -> Principal | None: ...


class AsyncTokenVerifier(Protocol):
    """A :class:`TokenVerifier` whose ``verify`` is ``async def`` (run as Flask
    runs async views)."""

    async def verify(self, token: str) -> Principal | None: ...


class InvalidToken(Exception):
    """The token is not acceptable (unknown, revoked, expired, not for us): 401."""

    def __init__(self, description: str = "The access token is invalid.") -> None:
        super().__init__(description)
        self.description = description


class VerifierUnavailable(Exception):
    """The token cannot be checked right now (the authorization server is
    unreachable): 503, with ``Retry-After: retry_after`` (seconds)."""

    def __init__(self, message: str = "The access token cannot be checked now.", *, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FunctionVerifier:
    """A plain function ``token -> Principal | None`` as a :class:`TokenVerifier`
    (an ``async def`` runs through the app's ``ensure_sync``)."""

    def __init__(self, fn: Callable[[str], Any]) -> None:
        self.fn: Callable[[str], Principal | None] = synced(fn, "The token verifier")

    def verify(self, token: str) -> Principal | None:
        return self.fn(token)


def as_verifier(value: Any) -> TokenVerifier:
    """A verifier object, or a function wrapped as one."""
    if isinstance(value, TokenVerifier):
        return FunctionVerifier(value.verify) if is_async(value.verify) else value
    if callable(value):
        return FunctionVerifier(value)
    raise TypeError(f"A token verifier needs a verify(token) method or must be callable (got {value!r})")


def scope_granted(granted: Iterable[str], required: str) -> bool:
    """Scope hierarchy: a granted scope implies itself and every scope below it
    in the ``:`` hierarchy, so ``files`` grants ``files:read`` and
    ``files:read:meta``; ``files:read`` does not grant ``files``."""
    return any(required == scope or required.startswith(scope + ":") for scope in granted)
