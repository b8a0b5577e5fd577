"""The MCP revisions we serve, and every per-revision difference in one table.

Handlers never compare version strings: they ask the :class:`Revision` of the
request what it allows.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Every revision this server answers, newest first.
SUPPORTED_VERSIONS: tuple[str, ...] = ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26")

#: Revisions served statelessly, from per-request ``_meta`` (no initialize).
STATELESS_VERSIONS: tuple[str, ...] = ("2026-07-28",)

#: Revisions negotiated by ``initialize`` and bound to ``Mcp-Session-Id``, newest first.
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")

#: What a legacy request without ``MCP-Protocol-Version`` (and no session to say
#: otherwise) is assumed to speak.
DEFAULT_LEGACY_VERSION = "2025-03-26"

_BASE_TOOL_FIELDS = frozenset({"name", "description", "inputSchema", "annotations"})
_BASE_IMPLEMENTATION_FIELDS = frozenset({"name", "version"})
_BASE_CONTENT = frozenset({"text", "image", "audio", "resource"})


@dataclass(frozen=True, slots=True)
class Revision:
    """What one protocol revision allows, expects and forbids."""

    version: str
    stateless: bool
    #: JSON-RPC batches (arrays) are accepted.
    batching: bool
    #: Keys a ``Tool`` definition may carry.
    tool_fields: frozenset[str]
    #: Keys ``serverInfo`` (an ``Implementation``) may carry.
    implementation_fields: frozenset[str]
    #: Content block types a tool result may carry.
    content_types: frozenset[str]
    #: Content blocks may carry ``_meta`` and ``annotations.lastModified``.
    content_meta: bool
    #: ``outputSchema`` on tools and ``structuredContent`` in results.
    structured_output: bool
    #: Invalid tool arguments are an ``isError`` result (SEP-1303), not ``-32602``.
    argument_errors_as_results: bool
    #: Every result carries ``resultType`` and serverInfo in ``_meta``.
    result_type: bool
    #: Discover, list and read results carry ``ttlMs`` and ``cacheScope``.
    cache_hints: bool
    #: HTTP status of a ``-32601`` answer (legacy clients read 404 as "session gone").
    method_not_found_status: int
    #: Methods handled by the core in this revision (feature methods are added by
    #: the features that serve them).
    core_methods: frozenset[str]


_LEGACY_METHODS = frozenset({"initialize", "ping", "tools/list", "tools/call", "logging/setLevel"})
_STATELESS_METHODS = frozenset({"server/discover", "tools/list", "tools/call", "subscriptions/listen"})

REVISIONS: dict[str, Revision] = {
    "2025-03-26": Revision(
        version="2025-03-26",
        stateless=False,
        batching=True,
        tool_fields=_BASE_TOOL_FIELDS,
        implementation_fields=_BASE_IMPLEMENTATION_FIELDS,
        content_types=_BASE_CONTENT,
        content_meta=False,
        structured_output=False,
        argument_errors_as_results=False,
        result_type=False,
        cache_hints=False,
        method_not_found_status=200,
        core_methods=_LEGACY_METHODS,
    ),
    "2025-06-18": Revision(
        version="2025-06-18",
        stateless=False,
        batching=False,
        tool_fields=_BASE_TOOL_FIELDS | {"title", "outputSchema", "_meta"},
        implementation_fields=_BASE_IMPLEMENTATION_FIELDS | {"title"},
        content_types=_BASE_CONTENT | {"resource_link"},
        content_meta=True,
        structured_output=True,
        argument_errors_as_results=False,
        result_type=False,
        cache_hints=False,
        method_not_found_status=200,
        core_methods=_LEGACY_METHODS,
    ),
    "2025-11-25": Revision(
        version="2025-11-25",
        stateless=False,
        batching=False,
        tool_fields=_BASE_TOOL_FIELDS | {"title", "outputSchema", "_meta", "icons"},
        implementation_fields=_BASE_IMPLEMENTATION_FIELDS
        | {"title", "description", "icons", "websiteUrl"},
        content_types=_BASE_CONTENT | {"resource_link"},
        content_meta=True,
        structured_output=True,
        argument_errors_as_results=True,
        result_type=False,
        cache_hints=False,
        method_not_found_status=200,
        core_methods=_LEGACY_METHODS,
    ),
    "2026-07-28": Revision(
        version="2026-07-28",
        stateless=True,
        batching=False,
        tool_fields=_BASE_TOOL_FIELDS | {"title", "outputSchema", "_meta", "icons"},
        implementation_fields=_BASE_IMPLEMENTATION_FIELDS
        | {"title", "description", "icons", "websiteUrl"},
        content_types=_BASE_CONTENT | {"resource_link"},
        content_meta=True,
        structured_output=True,
        argument_errors_as_results=True,
        result_type=True,
        cache_hints=True,
        method_not_found_status=404,
        core_methods=_STATELESS_METHODS,
    ),
}


def negotiate(requested: object) -> str:
    """The version an ``initialize`` answer offers: the one asked for when we
    speak it over a session, else our newest session-based revision."""
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LEGACY_VERSIONS[0]
