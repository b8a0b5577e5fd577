"""Client logos, served by the app itself: a page never hot-links a client's
``logo_uri`` (that would tell the client's origin who opens the consent page,
and show whatever that origin serves at that moment). The image is fetched
server-side through :meth:`MetadataDocuments.download` (the same address
checks, timeout and no redirects as metadata documents, with its own size
cap), accepted only when its bytes are a PNG, JPEG, GIF or WebP image (SVG,
which can carry script, is refused), cached, and answered with that checked
type and headers that let it be nothing but an image. A client with no logo,
or one that fails, gets a neutral placeholder."""

from __future__ import annotations

import logging
import threading
import time

from flask import Response

from .clients import ClientRejected, FetchesBusy, MetadataDocuments

logger = logging.getLogger("flask_mcp")

MAX_LOGO_BYTES = 64 * 1024
_MAX_CACHED = 200

#: The placeholder: a grey rounded square with a plug, our own markup (no script, no external reference).
PLACEHOLDER_SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64" width="64" height="64">'
    b'<rect width="64" height="64" rx="14" fill="#e6e8ee"/>'
    b'<path d="M25 14v10M39 14v10M20 24h24v8a12 12 0 0 1-24 0zM32 44v8" fill="none" stroke="#8a91a3"'
    b' stroke-width="4" stroke-linecap="round" stroke-linejoin="round"/></svg>'
)


def image_type(body: bytes) -> str | None:
    """The image type ``body``'s first bytes prove, or ``None`` (not an image we serve)."""
    if body.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if body.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if body.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(body) >= 12 and body[:4] == b"RIFF" and body[8:12] == b"WEBP":
        return "image/webp"
    return None


class Logos:
    """Fetches and caches logos (failures too, so a broken logo is not fetched on every page)."""

    def __init__(self, documents: MetadataDocuments, cache_ttl: float) -> None:
        self.documents = documents
        self.cache_ttl = cache_ttl
        self._cache: dict[str, tuple[float, tuple[bytes, str] | None]] = {}
        self._lock = threading.Lock()

    def get(self, logo_uri: str) -> tuple[bytes, str] | None:
        """(image, content type) of ``logo_uri``, or ``None`` when it cannot be used."""
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(logo_uri)
        if cached and cached[0] > now:
            return cached[1]
        try:
            found: tuple[bytes, str] | None = self.fetch(logo_uri)
        except FetchesBusy:
            return None  # the placeholder this once, and nothing remembered: the logo is not at fault
        except ClientRejected as exc:
            logger.warning("OAuth: the client logo %r is not shown: %s", logo_uri, exc)
            found = None
        with self._lock:
            self._cache[logo_uri] = (now + self.cache_ttl, found)
            if len(self._cache) > _MAX_CACHED:
                self._cache.pop(next(iter(self._cache)))
        return found

    def fetch(self, logo_uri: str) -> tuple[bytes, str]:
        """Download and check one logo; :class:`ClientRejected` says why it is refused."""
        body = self.documents.download(logo_uri, accept="image/png, image/jpeg, image/gif, image/webp",
                                       limit=MAX_LOGO_BYTES, what="logo")
        kind = image_type(body)
        if kind is None:
            raise ClientRejected("The client's logo is not a PNG, JPEG, GIF or WebP image.")
        return body, kind


def image_response(found: tuple[bytes, str] | None, max_age: int) -> Response:
    """The logo (or the placeholder) with headers that keep it an image: its checked type, no
    sniffing, a policy that runs nothing even when opened on its own, not embeddable elsewhere."""
    body, kind = found or (PLACEHOLDER_SVG, "image/svg+xml")
    response = Response(body, mimetype=kind)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'; sandbox"
    response.headers["Cross-Origin-Resource-Policy"] = "same-origin"
    response.headers["Cache-Control"] = f"private, max-age={max_age}"
    response.headers["Content-Disposition"] = "inline"
    return response
