"""What the authorization server keeps, and the small interface a place to keep
it must offer (:class:`OAuthStore`): SQLite by default, Redis across hosts, or
the app's own models. Tokens and codes are stored as SHA-256 hashes, never
as themselves, so a leaked store hands out no credential."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class CodeRecord:
    """An authorization code waiting to be exchanged (once)."""

    code_hash: str
    client_id: str
    user_id: str
    redirect_uri: str
    scope: str
    resource: str
    code_challenge: str
    code_challenge_method: str
    expires_at: float


@dataclass(frozen=True)
class TokenRecord:
    """One issued access token and its refresh token.

    ``family`` is shared by every token rotated from one authorization: a
    refresh token presented again after its rotation revokes the whole family
    (RFC 9700 §4.14.2 reuse detection)."""

    access_hash: str
    refresh_hash: str | None
    family: str
    client_id: str
    user_id: str
    scope: str
    resource: str
    issued_at: float
    expires_at: float
    refresh_expires_at: float
    revoked: bool = False
    #: The refresh token was exchanged for a newer one (rotation).
    rotated: bool = False


@dataclass(frozen=True)
class Connection:
    """A client a user connected: what the "connected apps" page lists."""

    client_id: str
    client_name: str
    scope: str
    first_connected: float
    last_issued: float
    #: When one of its access tokens last authorized a request (to the minute), or ``None`` (not yet).
    last_used: float | None = None


class OAuthStore(Protocol):
    """Where codes, tokens and dynamically registered clients live. Every
    method is atomic on its own."""

    def save_client(self, client_id: str, document: dict[str, Any]) -> None:
        """Keep an RFC 7591 registration (its metadata, as JSON)."""
        ...

    def client_document(self, client_id: str) -> dict[str, Any] | None: ...

    def save_code(self, record: CodeRecord) -> None: ...

    def take_code(self, code_hash: str, family: str) -> CodeRecord | None:
        """Mark the code used, by the token ``family`` its exchange will produce,
        and return it, in one atomic step: a second call for the same code gets
        ``None``. The used code is kept (hashed) until it expires, so that a
        replay can find that family (:meth:`replay_code`)."""
        ...

    def replay_code(self, code_hash: str) -> str | None:
        """A used code was presented again: remember that, and return the family
        its first exchange produced (``None``: unknown or expired)."""
        ...

    def code_replayed(self, code_hash: str) -> bool:
        """Whether a used code was presented again (asked after its first exchange
        saved its tokens: a replay racing that exchange is caught here)."""
        ...

    def save_token(self, record: TokenRecord, client_name: str) -> None: ...

    def token_by_access(self, access_hash: str) -> TokenRecord | None: ...

    def token_by_refresh(self, refresh_hash: str) -> TokenRecord | None: ...

    def claim_rotation(self, refresh_hash: str) -> bool:
        """Mark the refresh token rotated, in one atomic step; ``True`` only for
        the one caller that changed it (``False``: already rotated, or gone).
        Of two refreshes racing with the same token, exactly one may win."""
        ...

    def revoke_family(self, family: str) -> None: ...

    def mark_used(self, access_hash: str, when: float) -> None:
        """Record that the access token authorized a request at ``when`` (a token that is gone
        stays gone); :meth:`connections` reports the latest as ``last_used``."""
        ...

    def connections(self, user_id: str) -> list[Connection]: ...

    def revoke_client(self, user_id: str, client_id: str) -> int:
        """Revoke every token of ``client_id`` for ``user_id``; how many were live."""
        ...
