"""OAuth clients known by their Client ID Metadata Document: the ``client_id``
is an HTTPS URL whose JSON document names the client and its redirect URIs.

Documents are fetched with urllib3 (at most 5 KB, no redirects), each fetch
over within one deadline however slowly the document's server answers
(:mod:`flask_mcp.auth.deadline`), at most ``max_fetches`` at a time per
process (an authorization request beyond that is refused at once rather than
made to wait: slow documents must not take every worker thread), cached, and
never from a private, loopback, link-local or otherwise internal
address: an authorization server must not become a way to probe the network
it sits in (SSRF). The host is resolved once, every address is checked, and
the connection goes to a checked address (TLS still verified for the host
name): a second lookup at connect time would let a rebinding DNS server
answer a public address to the check and an internal one to the connection."""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from ..deadline import Deadline, current_deadline, deadline, urllib3_pool_classes

MAX_DOCUMENT_BYTES = 5 * 1024

#: ``socket.getaddrinfo``'s shape: (host, port, proto=...) -> [(family, type, proto, canonname, sockaddr)].
Resolver = Callable[..., Sequence[tuple[Any, ...]]]


class ClientRejected(Exception):
    """The client_id does not name a usable client; the message says why."""


class FetchesBusy(ClientRejected):
    """As many metadata documents as allowed are being fetched already: try again shortly."""


@dataclass(frozen=True)
class Client:
    """A public client (no secret: PKCE protects its codes), as authlib sees it."""

    client_id: str
    client_name: str
    redirect_uris: tuple[str, ...]
    client_uri: str | None = None
    #: An https URL of the client's logo; fetched by the server (never hot-linked), see logos.py.
    logo_uri: str | None = None

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


def checked_addresses(host: str, port: int, allow_loopback: bool, resolve: Resolver = socket.getaddrinfo) -> list[str]:
    """Resolve ``host`` once and return its addresses, refusing it if any of them is internal."""
    try:
        infos = resolve(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        raise ClientRejected(f"The client_id host {host!r} does not resolve.") from None
    addresses: list[str] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not (address.is_loopback and allow_loopback) and (not address.is_global or address.is_multicast):
            raise ClientRejected(
                f"The client_id host {host!r} resolves to a private or internal address ({address}): refused."
            )
        if str(address) not in addresses:
            addresses.append(str(address))
    if not addresses:
        raise ClientRejected(f"The client_id host {host!r} does not resolve.")
    return addresses


def _ascii_host(host: str) -> str:
    if host.isascii():
        return host
    import idna  # requests' own dependency: IDNA 2008 as requests encodes host names

    try:
        return str(idna.encode(host, uts46=True).decode("ascii"))
    except idna.IDNAError:
        raise ClientRejected(f"The client_id host {host!r} is not a valid host name.") from None


def _ca_settings(verify: bool | str) -> dict[str, Any]:
    """urllib3 trust settings for ``verify`` as requests reads it: a bundle file or directory, or
    True for REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE if set, else certifi's bundle."""
    if verify is False:
        return {"cert_reqs": "CERT_NONE", "assert_hostname": False}
    if verify is True:
        import certifi

        verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or certifi.where()
    if os.path.isdir(verify):
        return {"cert_reqs": "CERT_REQUIRED", "ca_cert_dir": verify}
    return {"cert_reqs": "CERT_REQUIRED", "ca_certs": verify}


class MetadataDocuments:
    """Fetches and caches Client ID Metadata Documents.

    ``resolve`` is how host names become addresses (``socket.getaddrinfo``);
    it is called once per fetch and only the addresses it returned are
    contacted."""

    def __init__(self, *, timeout: float = 5.0, cache_ttl: float = 300.0, allow_loopback: bool = False,
                 verify: bool | str = True, resolve: Resolver = socket.getaddrinfo, max_fetches: int = 2) -> None:
        self.timeout = timeout
        self.max_fetches = max_fetches
        self._fetch_slots = threading.BoundedSemaphore(max_fetches)
        self.cache_ttl = cache_ttl
        self.allow_loopback = allow_loopback
        self.verify = verify
        self.resolve = resolve
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
        body = self.download(client_id, accept="application/json")
        try:
            document = json.loads(body)
        except ValueError:
            raise ClientRejected("The client's metadata document is not JSON.") from None
        return client_from_document(client_id, document)

    def download(self, url: str, *, accept: str, limit: int = MAX_DOCUMENT_BYTES,
                 what: str = "metadata document") -> bytes:
        """GET ``url`` (https, with a path) under this class's rules: one resolution, every
        address checked, at most ``limit`` bytes, all within one deadline of ``timeout``
        seconds however slowly the bytes come, and at most ``max_fetches`` such fetches at
        once (:class:`FetchesBusy` beyond). Metadata documents and client logos alike."""
        parts = urlsplit(url)
        try:
            port = parts.port or 443
        except ValueError:
            port = 0
        if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/") or parts.fragment \
                or parts.username or parts.password or not port:
            if what == "metadata document":
                raise ClientRejected("The client_id must be an https URL with a path (a Client ID Metadata Document).")
            raise ClientRejected(f"The client's {what} must be an https URL with a path.")
        if not self._fetch_slots.acquire(blocking=False):
            raise FetchesBusy(f"{self.max_fetches} client metadata documents are being fetched already; "
                              "try again in a moment.")
        try:
            with deadline(self.timeout) as budget:
                try:
                    host = _ascii_host(parts.hostname)
                    addresses = checked_addresses(host, port, self.allow_loopback, self.resolve)
                    name = f"[{host}]" if ":" in host else host
                    headers = {"Host": name if port == 443 else f"{name}:{port}", "Accept": accept}
                    target = quote(parts.path + (f"?{parts.query}" if parts.query else ""),
                                   safe="!#$%&'()*+,/:;=?@[]~")
                    return self._download(addresses, port, host, target, headers, limit, what)
                except TimeoutError:  # the deadline passed between two steps
                    raise _too_slow(budget, what) from None
        finally:
            self._fetch_slots.release()

    def _download(self, addresses: list[str], port: int, host: str, target: str, headers: dict[str, str],
                  limit: int, what: str) -> bytes:
        """GET ``target`` from the first checked address that answers, TLS verified for ``host``,
        all within the deadline :meth:`download` set."""
        import urllib3

        budget = current_deadline_of_fetch()
        pool_class = urllib3_pool_classes()[1]
        failure: Exception | None = None
        for address in addresses:
            pool = pool_class(
                address, port, maxsize=1, retries=False, timeout=urllib3.Timeout(connect=self.timeout,
                                                                                   read=self.timeout),
                server_hostname=host, assert_hostname=host, **_ca_settings(self.verify))
            try:
                response = pool.urlopen("GET", target, headers=headers, redirect=False, preload_content=False,
                                        assert_same_host=False)
            except (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError) as exc:
                failure = exc  # this address does not answer: try the next checked one, as a client would
                pool.close()
                if budget.expired:
                    raise _too_slow(budget, what) from None
                continue
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                pool.close()
                raise _too_slow(budget, what) if budget.expired else _unfetchable(exc, what) from None
            try:
                return _read_capped(response, limit, what)
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                raise _too_slow(budget, what) if budget.expired else _unfetchable(exc, what) from None
            finally:
                response.release_conn()
                pool.close()
        raise _unfetchable(failure, what) from None


def current_deadline_of_fetch() -> Deadline:
    found = current_deadline()
    assert found is not None, "MetadataDocuments.download sets the fetch's deadline"
    return found


def _unfetchable(exc: Exception | None, what: str = "metadata document") -> ClientRejected:
    return ClientRejected(f"The client's {what} could not be fetched ({type(exc).__name__}).")


def _too_slow(budget: Deadline, what: str = "metadata document") -> ClientRejected:
    return ClientRejected(f"The client's {what} took too long to arrive (over {budget.seconds:g} s).")


def _read_capped(response: Any, limit: int, what: str) -> bytes:
    if response.status != 200:
        raise ClientRejected(f"The client's {what} answered HTTP {response.status}.")
    body = b""
    for chunk in response.stream(1024):
        body += chunk
        if len(body) > limit:
            raise ClientRejected(f"The client's {what} is over {limit} bytes.")
    return body


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
    return Client(
        client_id=client_id,
        client_name=name if isinstance(name, str) and name.strip() else urlsplit(client_id).hostname or client_id,
        redirect_uris=tuple(uris),
        client_uri=_https_url(document.get("client_uri")),
        logo_uri=_https_url(document.get("logo_uri")),
    )


def _https_url(value: Any) -> str | None:
    """``value`` if it is an https URL with a host (a page may link to it), else ``None``:
    a ``javascript:`` or ``data:`` URI from a client's metadata never reaches a page."""
    if not isinstance(value, str) or len(value) > 2000:
        return None
    parts = urlsplit(value)
    return value if parts.scheme == "https" and parts.hostname and not parts.username else None
