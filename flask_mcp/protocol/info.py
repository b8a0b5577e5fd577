"""Who the server is and how it pages and caches: fixed at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .versions import Revision


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """Who we are, as ``serverInfo`` / ``io.modelcontextprotocol/serverInfo``."""

    name: str
    version: str
    title: str | None = None
    description: str | None = None
    website_url: str | None = None
    icons: tuple[dict[str, Any], ...] = ()

    def for_revision(self, revision: Revision) -> dict[str, Any]:
        full: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.title:
            full["title"] = self.title
        if self.description:
            full["description"] = self.description
        if self.website_url:
            full["websiteUrl"] = self.website_url
        if self.icons:
            full["icons"] = list(self.icons)
        return {k: v for k, v in full.items() if k in revision.implementation_fields}


@dataclass(frozen=True, slots=True)
class ProtocolOptions:
    page_size: int = 100
    ttl_ms: int = 60_000
    cache_scope: str = "public"
    max_json_depth: int = 64
    #: What a legacy session keeps of its ``initialize`` (``clientInfo`` and
    #: ``capabilities``, as JSON) at most: it is stored for the session's life,
    #: and unused sessions live until they expire.
    max_client_info_bytes: int = 64 * 1024
    #: The skills extension answers ``resources/directory/read`` (and says so:
    #: ``directoryRead: true``); off by default, as in the extension.
    skills_directory_read: bool = False
