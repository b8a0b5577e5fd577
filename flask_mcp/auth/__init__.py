"""Who is calling, and may they: the caller's :class:`Principal` and the
verifiers that make one of a bearer token (``tokens``, ``verifiers``,
``jwks``), scopes (``scopes``), the endpoint's bearer check and RFC 9728
metadata (``bearer``, ``metadata``), the active account (``accounts``), rate
limits (``ratelimit``), the DNS-rebinding and browser defences
(``rebinding``, ``hardening``), and the app's own authorization server
(``oauth/``).

May import ``protocol``, ``backends``, ``config``, ``errors`` and ``coroutines``
(an ``async def`` verifier); never the WSGI layer (``http``), what an app
declares (``features``) or the extension.
The names below are the ones ``flask_mcp.auth`` has always offered.
"""

from .bearer import (
    MAX_TOKEN_LENGTH,
    AuthenticationRequired,
    Authenticator,
    AuthorizationServerUnavailable,
    DetailedRefusal,
    MalformedAuthorization,
    challenge,
)
from .metadata import WELL_KNOWN, metadata_url, register_metadata, resource_url
from .scopes import InsufficientScope, permits, require_scopes, validate_scopes
from .tokens import (
    AsyncTokenVerifier,
    FunctionVerifier,
    InvalidToken,
    Principal,
    TokenVerifier,
    VerifierUnavailable,
    as_verifier,
    scope_granted,
    token_hash,
)

__all__ = [
    "AsyncTokenVerifier",
    "MAX_TOKEN_LENGTH",
    "WELL_KNOWN",
    "AuthenticationRequired",
    "Authenticator",
    "AuthorizationServerUnavailable",
    "DetailedRefusal",
    "FunctionVerifier",
    "InsufficientScope",
    "InvalidToken",
    "MalformedAuthorization",
    "Principal",
    "TokenVerifier",
    "VerifierUnavailable",
    "as_verifier",
    "challenge",
    "metadata_url",
    "permits",
    "register_metadata",
    "require_scopes",
    "resource_url",
    "scope_granted",
    "token_hash",
    "validate_scopes",
]
