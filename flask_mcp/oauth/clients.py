"""OAuth clients known by their Client ID Metadata Document: the ``client_id``
is an HTTPS URL whose JSON document names the client and its redirect URIs.

Documents are fetched with ``requests`` (bounded size and time, no
redirects), cached, and never from a private, loopback, link-local or
otherwise internal address: an authorization server must not become a way
to probe the network it sits in (SSRF)."""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MAX_DOCUMENT_BYTES = 5 * 1024


class ClientRejected(Exception):
    """The client_id does not name a usable client; the message says why."""


@dataclass(frozen=True)
class Client:
    """A public client (no secret: PKCE protects its codes), as authlib sees it."""

    client_id: str
    client_name: str
    redirect_uris: tuple[str, ...]
    client_uri: str | None = None

    # --- authlib's ClientMixin
    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        return self.redirect_uris[0] if len(self.redirect_uris) == 1 else None

    def get_allowed_scope(self, scope: str | None) -> str:
        return scope or ""

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return False

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "none"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token")


def _refuse_internal(host: str, port: int, allow_loopback: bool) -> None:
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except OSError:
        raise ClientRejected(f"The client_id host {host!r} does not resolve.") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if address.is_loopback and allow_loopback:
            continue
        if not address.is_global or address.is_multicast:
            raise ClientRejected(
                f"The client_id host {host!r} resolves to a private or internal address ({address}): refused."
            )


class MetadataDocuments:
    """Fetches and caches Client ID Metadata Documents."""

    def __init__(self, *, timeout: float = 5.0, cache_ttl: float = 300.0, allow_loopback: bool = False,
                 verify: bool | str = True) -> None:
        import requests

        self._requests = requests
        self.timeout = timeout
        self.cache_ttl = cache_ttl
        self.allow_loopback = allow_loopback
        self.verify = verify
        self._session = requests.Session()
        self._cache: dict[str, tuple[float, Client]] = {}
        self._lock = threading.Lock()

    def get(self, client_id: str) -> Client:
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(client_id)
        if cached and cached[0] > now:
            return cached[1]
        client = self._fetch(client_id)
        with self._lock:
            self._cache[client_id] = (now + self.cache_ttl, client)
            if len(self._cache) > 1000:
                self._cache.pop(next(iter(self._cache)))
        return client

    def _fetch(self, client_id: str) -> Client:
        parts = urlsplit(client_id)
        if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/") or parts.fragment \
                or parts.username or parts.password:
            raise ClientRejected("The client_id must be an https URL with a path (a Client ID Metadata Document).")
        _refuse_internal(parts.hostname, parts.port or 443, self.allow_loopback)
        try:
            with self._session.get(client_id, timeout=(self.timeout, self.timeout), allow_redirects=False,
                                   stream=True, verify=self.verify,
                                   headers={"Accept": "application/json"}) as response:
                if response.status_code != 200:
                    raise ClientRejected(f"The client's metadata document answered HTTP {response.status_code}.")
                body = b""
                deadline = time.monotonic() + self.timeout
                for chunk in response.iter_content(1024):
                    body += chunk
                    if len(body) > MAX_DOCUMENT_BYTES:
                        raise ClientRejected(f"The client's metadata document is over {MAX_DOCUMENT_BYTES} bytes.")
                    if time.monotonic() > deadline:
                        raise ClientRejected("The client's metadata document took too long to arrive.")
        except self._requests.RequestException as exc:
            raise ClientRejected(f"The client's metadata document could not be fetched ({type(exc).__name__}).") \
                from None
        try:
            document = json.loads(body)
        except ValueError:
            raise ClientRejected("The client's metadata document is not JSON.") from None
        return client_from_document(client_id, document)


def client_from_document(client_id: str, document: Any) -> Client:
    """Check a metadata document and make it a :class:`Client`."""
    if not isinstance(document, dict):
        raise ClientRejected("The client's metadata document is not a JSON object.")
    if document.get("client_id") != client_id:
        raise ClientRejected("The client's metadata document names another client_id.")
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise ClientRejected("The client's metadata document lists no redirect_uris.")
    method = document.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise ClientRejected("Only public clients (token_endpoint_auth_method 'none') may use a metadata document.")
    name = document.get("client_name")
    client_uri = document.get("client_uri")
    return Client(
        client_id=client_id,
        client_name=name if isinstance(name, str) and name.strip() else urlsplit(client_id).hostname or client_id,
        redirect_uris=tuple(uris),
        client_uri=client_uri if isinstance(client_uri, str) else None,
    )
