"""The MCP revisions we serve, and every per-revision difference in one table.

Handlers never compare version strings: they ask the :class:`Revision` of the
request what it allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import BadProtocolVersionHeader

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
_BASE_RESOURCE_FIELDS = frozenset({"uri", "name", "description", "mimeType", "size", "annotations"})
_BASE_TEMPLATE_FIELDS = frozenset({"uriTemplate", "name", "description", "mimeType", "annotations"})
_BASE_PROMPT_FIELDS = frozenset({"name", "description", "arguments"})
_BASE_PROMPT_ARGUMENT_FIELDS = frozenset({"name", "description", "required"})
#: What 2025-06-18 added to resources, templates and prompts; 2025-11-25 then added icons.
_TITLED = frozenset({"title", "_meta"})
_ICONS = frozenset({"icons"})


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
    #: Keys a ``Resource`` (``resources/list``) may carry.
    resource_fields: frozenset[str]
    #: Keys a ``ResourceTemplate`` (``resources/templates/list``) may carry.
    template_fields: frozenset[str]
    #: Keys a ``Prompt`` (``prompts/list``) may carry.
    prompt_fields: frozenset[str]
    #: Keys each of a prompt's ``arguments`` may carry.
    prompt_argument_fields: frozenset[str]
    #: ``completion/complete`` carries ``context.arguments`` (the other arguments so far).
    completion_context: bool
    #: JSON-RPC code of ``resources/read`` for an unknown URI: ``-32002`` until
    #: 2025-11-25, ``-32602`` (SEP-2164) in 2026-07-28.
    resource_not_found_code: int
    #: Every method served in this revision.
    core_methods: frozenset[str]
    #: Response streams open with a priming event, carry event ids and can be
    #: resumed with ``GET`` + ``Last-Event-ID`` (older clients choke on priming).
    resumable_streams: bool = False
    #: A durable call's stream (a tool run on a task queue, docs/celery.md) is
    #: primed, carries event ids and can be resumed on any worker: 2025-11-25,
    #: and 2025-06-18, whose streams may carry ids (the official Python and
    #: TypeScript clients take the priming event and resume in both).
    durable_streams: bool = False
    #: The skills extension (SEP-2640) is declared in ``capabilities.extensions``
    #: and its methods served: 2026-07-28, whose schema has the ``extensions`` map,
    #: and 2025-11-25 sessions, for which SEP-2133 negotiates extensions in
    #: ``initialize``. Older sessions still read skill files as ordinary resources.
    skills: bool = False


#: Resources, prompts and completion, in both eras (each answers -32601 while
#: nothing of its kind is registered, as its capability is then not advertised).
_CATALOG_METHODS = frozenset(
    {"resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get",
     "completion/complete"}
)
_LEGACY_METHODS = frozenset(
    {"initialize", "ping", "tools/list", "tools/call", "logging/setLevel", "resources/subscribe",
     "resources/unsubscribe"}
) | _CATALOG_METHODS
#: The skills extension's methods (SEP-2640), on the revisions whose ``skills`` is true.
_SKILL_METHODS = frozenset({"skills/list", "skills/get", "resources/directory/read"})
# 2026-07-28 replaced resources/subscribe and unsubscribe with subscriptions/listen.
# The tasks extension's methods are served (to requests declaring it) when the backend keeps tasks.
_STATELESS_METHODS = (
    frozenset({"server/discover", "tools/list", "tools/call", "subscriptions/listen"}) | _CATALOG_METHODS
    | {"tasks/get", "tasks/update", "tasks/cancel"}
)

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
        resource_fields=_BASE_RESOURCE_FIELDS,
        template_fields=_BASE_TEMPLATE_FIELDS,
        prompt_fields=_BASE_PROMPT_FIELDS,
        prompt_argument_fields=_BASE_PROMPT_ARGUMENT_FIELDS,
        completion_context=False,
        resource_not_found_code=-32002,
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
        resource_fields=_BASE_RESOURCE_FIELDS | _TITLED,
        template_fields=_BASE_TEMPLATE_FIELDS | _TITLED,
        prompt_fields=_BASE_PROMPT_FIELDS | _TITLED,
        prompt_argument_fields=_BASE_PROMPT_ARGUMENT_FIELDS | {"title"},
        completion_context=True,
        resource_not_found_code=-32002,
        core_methods=_LEGACY_METHODS,
        durable_streams=True,
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
        resource_fields=_BASE_RESOURCE_FIELDS | _TITLED | _ICONS,
        template_fields=_BASE_TEMPLATE_FIELDS | _TITLED | _ICONS,
        prompt_fields=_BASE_PROMPT_FIELDS | _TITLED | _ICONS,
        prompt_argument_fields=_BASE_PROMPT_ARGUMENT_FIELDS | {"title"},
        completion_context=True,
        resource_not_found_code=-32002,
        core_methods=_LEGACY_METHODS | _SKILL_METHODS,
        resumable_streams=True,
        durable_streams=True,
        skills=True,
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
        resource_fields=_BASE_RESOURCE_FIELDS | _TITLED | _ICONS,
        template_fields=_BASE_TEMPLATE_FIELDS | _TITLED | _ICONS,
        prompt_fields=_BASE_PROMPT_FIELDS | _TITLED | _ICONS,
        prompt_argument_fields=_BASE_PROMPT_ARGUMENT_FIELDS | {"title"},
        completion_context=True,
        resource_not_found_code=-32602,
        core_methods=_STATELESS_METHODS | _SKILL_METHODS,
        skills=True,
    ),
}


def negotiate(requested: object) -> str:
    """The version an ``initialize`` answer offers: the one asked for when we
    speak it over a session, else our newest session-based revision."""
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LEGACY_VERSIONS[0]


def check_session_version_header(header_version: str | None, negotiated: str) -> None:
    """A request of a session, single or batched, names the session's version or none."""
    if header_version is not None and header_version != negotiated:
        raise BadProtocolVersionHeader(
            f"MCP-Protocol-Version header {header_version!r} differs from the version "
            f"negotiated for this session ({negotiated})."
        )


def check_legacy_version_header(header_version: str | None) -> None:
    """The header of an initialize-era request names one of those revisions, if any."""
    if header_version is not None and header_version not in LEGACY_VERSIONS:
        raise BadProtocolVersionHeader(
            f"Unsupported MCP-Protocol-Version header {header_version!r}: this server "
            f"speaks {', '.join(SUPPORTED_VERSIONS)} (2026-07-28 requests also need "
            "the _meta protocolVersion)."
        )
