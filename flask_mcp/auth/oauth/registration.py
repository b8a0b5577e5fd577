"""RFC 7591 dynamic client registration (``MCP_OAUTH_DYNAMIC_REGISTRATION``),
for hosts that do not publish a Client ID Metadata Document. Open
registration, public clients only: a registered client gets an id, never a
secret, and PKCE protects its codes as it does every other client's."""

from __future__ import annotations

from typing import Any

from authlib.oauth2.rfc6749.errors import OAuth2Error
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint

from .clients import ClientRejected, client_from_document
from .store import OAuthStore


class InvalidClientMetadataError(OAuth2Error):  # type: ignore[misc]
    error = "invalid_client_metadata"


class Registration(ClientRegistrationEndpoint):  # type: ignore[misc]
    store: OAuthStore
    server_metadata: Any  # () -> dict, the RFC 8414 document

    def authenticate_token(self, request: Any) -> bool:
        return True  # open registration: anyone may register a public client

    def get_server_metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = self.server_metadata()
        return metadata

    def extract_client_metadata(self, request: Any) -> dict[str, Any]:
        data = request.payload.data
        method = data.get("token_endpoint_auth_method", "none") if isinstance(data, dict) else "none"
        if method != "none":
            raise InvalidClientMetadataError(
                "Only public clients may register here: token_endpoint_auth_method must be 'none'.")
        metadata: dict[str, Any] = super().extract_client_metadata(request)
        metadata["token_endpoint_auth_method"] = "none"
        return metadata

    def generate_client_info(self, request: Any) -> dict[str, Any]:
        info: dict[str, Any] = super().generate_client_info(request)
        info.pop("client_secret", None)
        info.pop("client_secret_expires_at", None)
        return info

    def save_client(self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any) -> Any:
        document = {**client_metadata, "client_id": client_info["client_id"]}
        try:
            client = client_from_document(client_info["client_id"], document)
        except ClientRejected as exc:
            raise InvalidClientMetadataError(str(exc)) from None
        self.store.save_client(client.client_id, document)
        return client
