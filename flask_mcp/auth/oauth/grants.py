"""Authlib's grants, tied to an :class:`~flask_mcp.auth.oauth.store.OAuthStore`:
authorization code with PKCE S256 required (``plain`` refused), a code
presented twice revoking the tokens of its first exchange (OAuth 2.1 4.1.3,
RFC 6749 4.1.2), RFC 8707 resource indicators, refresh tokens rotated on every use with reuse
detection, RFC 7009 revocation."""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc6749.errors import InvalidGrantError, InvalidRequestError, InvalidScopeError, OAuth2Error
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge

from ..tokens import scope_granted, token_hash
from .clients import Client
from .store import CodeRecord, OAuthStore, TokenRecord

logger = logging.getLogger("flask_mcp")


class InvalidTargetError(OAuth2Error):  # type: ignore[misc]
    """RFC 8707: the ``resource`` asked for is not this server's MCP endpoint."""

    error = "invalid_target"


class _Code:
    """A :class:`CodeRecord` as authlib's ``AuthorizationCodeMixin``, with the
    token ``family`` its exchange produces."""

    def __init__(self, record: CodeRecord, family: str) -> None:
        self.record = record
        self.family = family

    def get_redirect_uri(self) -> str:
        return self.record.redirect_uri

    def get_scope(self) -> str:
        return self.record.scope

    @property
    def code_challenge(self) -> str:
        return self.record.code_challenge

    @property
    def code_challenge_method(self) -> str:
        return self.record.code_challenge_method


class _Token:
    """A :class:`TokenRecord` as authlib's ``TokenMixin``."""

    def __init__(self, record: TokenRecord) -> None:
        self.record = record

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.record.client_id

    def get_scope(self) -> str:
        return self.record.scope

    def get_expires_in(self) -> int:
        return int(self.record.expires_at - self.record.issued_at)

    def is_expired(self) -> bool:
        return self.record.expires_at <= time.time()

    def is_revoked(self) -> bool:
        return self.record.revoked


class S256Required(CodeChallenge):  # type: ignore[misc]
    """PKCE on every authorization request, S256 only (OAuth 2.1, MCP authorization)."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("PKCE is required: send code_challenge with code_challenge_method=S256.")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("Only code_challenge_method=S256 is accepted ('plain' is refused).")
        super().validate_code_challenge(grant, redirect_uri)


def check_resource(requested: list[str], expected: str) -> str:
    """The resource a token will be bound to: ``expected`` (this MCP endpoint),
    whether the client named it or not; any other value is refused."""
    for value in requested:
        if value.rstrip("/") != expected.rstrip("/"):
            raise InvalidTargetError(f"This server issues tokens only for the resource {expected}.")
    return expected


class AuthorizationCodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]

    store: OAuthStore
    resource: Any  # () -> str, this MCP endpoint's URL
    supported_scopes: Any  # () -> tuple[str, ...], what the server's tools declare (or MCP_AUTH_SCOPES)
    code_ttl: float

    def validate_authorization_request(self) -> str:
        redirect_uri: str = super().validate_authorization_request()
        try:
            check_resource(self.request.payload.datalist.get("resource", []), self.resource())
            supported = self.supported_scopes()
            unknown = [scope for scope in (self.request.payload.scope or "").split()
                       if supported and not scope_granted(supported, scope)]
            if unknown:
                raise InvalidScopeError(f"This server does not offer the scope {' '.join(unknown)}.")
        except OAuth2Error as error:
            error.redirect_uri = redirect_uri
            error.state = self.request.payload.state
            raise
        return redirect_uri

    def save_authorization_code(self, code: str, request: Any) -> None:
        data = request.payload.data
        self.store.save_code(CodeRecord(
            code_hash=token_hash(code),
            client_id=request.client.client_id,
            user_id=str(request.user),
            redirect_uri=request.payload.redirect_uri or "",
            scope=request.scope or "",
            resource=self.resource(),
            code_challenge=data.get("code_challenge", ""),
            code_challenge_method=data.get("code_challenge_method", ""),
            expires_at=time.time() + self.code_ttl,
        ))

    def query_authorization_code(self, code: str, client: Client) -> _Code | None:
        # Taken (marked used) at once: a code works once, even when this exchange fails later.
        code_hash, family = token_hash(code), new_family()
        record = self.store.take_code(code_hash, family)
        if record is None:
            replayed = self.store.replay_code(code_hash)
            if replayed is not None:
                logger.warning("OAuth: client %s presented a used authorization code again; revoking the "
                               "tokens it was exchanged for", client.client_id)
                self.store.revoke_family(replayed)
            return None
        if record.expires_at <= time.time():
            return None
        if record.client_id != client.client_id:
            logger.warning("OAuth: client %s presented a code issued to %s; refused", client.client_id,
                           record.client_id)
            return None
        check_resource(self.request.payload.datalist.get("resource", []), record.resource)
        return _Code(record, family)

    def delete_authorization_code(self, authorization_code: _Code) -> None:
        """Called after the tokens were saved. Already taken by query_authorization_code;
        but a replay racing this exchange may have revoked the family before its
        tokens existed: then revoke it again, so they go with it."""
        if self.store.code_replayed(authorization_code.record.code_hash):
            self.store.revoke_family(authorization_code.family)

    def authenticate_user(self, authorization_code: _Code) -> str:
        return authorization_code.record.user_id


class RefreshTokenGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    store: OAuthStore

    def authenticate_refresh_token(self, refresh_token: str) -> _Token | None:
        record = self.store.token_by_refresh(token_hash(refresh_token))
        if record is None or record.revoked:
            return None
        if record.rotated:
            self._reused(record)
            return None
        if record.refresh_expires_at <= time.time():
            return None
        check_resource(self.request.payload.datalist.get("resource", []), record.resource)
        return _Token(record)

    def validate_token_request(self) -> None:
        """After authlib's checks (client, scope), claim the refresh token in
        one atomic store operation: of two requests racing with the same token
        only one wins; the other is reuse, and revokes the family."""
        super().validate_token_request()
        record: TokenRecord = self.request.refresh_token.record
        if record.refresh_hash is None or not self.store.claim_rotation(record.refresh_hash):
            self._reused(record)
            raise InvalidGrantError()

    def _reused(self, record: TokenRecord) -> None:
        logger.warning("OAuth: a rotated refresh token of client %s was used again; revoking its family",
                       record.client_id)
        self.store.revoke_family(record.family)

    def authenticate_user(self, refresh_token: _Token) -> str:
        return refresh_token.record.user_id

    def revoke_old_credential(self, refresh_token: _Token) -> None:
        """Already rotated (claimed before any token was issued). But a racing
        reuse may have revoked the family before the new pair was saved: then
        revoke it again, so the new pair goes with it."""
        old = refresh_token.record
        current = self.store.token_by_refresh(old.refresh_hash) if old.refresh_hash else None
        if current is None or current.revoked:
            self.store.revoke_family(old.family)


class Revocation(RevocationEndpoint):  # type: ignore[misc]
    """RFC 7009: revoking either token of a pair revokes its whole family."""

    CLIENT_AUTH_METHODS = ["none"]

    store: OAuthStore

    def query_token(self, token_string: str, token_type_hint: str | None) -> _Token | None:
        key = token_hash(token_string)
        record = None
        if token_type_hint != "refresh_token":
            record = self.store.token_by_access(key)
        if record is None:
            record = self.store.token_by_refresh(key)
        if record is None and token_type_hint == "refresh_token":
            record = self.store.token_by_access(key)
        return _Token(record) if record else None

    def revoke_token(self, token: _Token, request: Any) -> None:
        self.store.revoke_family(token.record.family)


def new_family() -> str:
    return secrets.token_urlsafe(16)
