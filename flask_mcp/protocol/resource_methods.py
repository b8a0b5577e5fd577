"""``resources/*``: listing resources and templates, reading one (which may ask
the client for input on 2026-07-28), and the legacy subscribe/unsubscribe."""

from __future__ import annotations

from typing import Any

from .errors import InvalidParams, MCPError, MethodNotFound, MissingClientCapability, ResourceNotFound
from .info import ProtocolOptions
from .pagination import page
from .providers import ReadOutcome, ResourceProvider
from .request_info import RequestInfo
from .round_trips import Interim, RoundTrips, is_retry
from .session import SessionStore
from .shaping import contents_for, definition_for, with_cache_hints
from .versions import Revision


class ResourceMethods:
    """The ``resources`` feature of the core."""

    def __init__(
        self,
        resources: ResourceProvider | None,
        *,
        options: ProtocolOptions,
        rounds: RoundTrips,
        sessions: SessionStore,
    ) -> None:
        self.resources = resources
        self.options = options
        self.rounds = rounds
        self.sessions = sessions

    def table(self) -> dict[str, Any]:
        return {
            "resources/list": self.list_resources,
            "resources/templates/list": self.list_templates,
            "resources/read": self.read,
            "resources/subscribe": self.subscribe,
            "resources/unsubscribe": self.subscribe,
        }

    def capabilities(self, revision: Revision, live: bool) -> dict[str, Any]:
        """``resources`` once something is registered. ``subscribe`` and
        ``listChanged`` only where they are delivered: ``live`` means a bus
        carries them to 2026-07-28 listen streams (legacy clients would need a GET
        stream, which this server does not open)."""
        if not self.resources:
            return {}
        capability = {"subscribe": True, "listChanged": True} if live else {}
        result: dict[str, Any] = {"resources": capability}
        extensions = self.resources.extensions()
        if extensions:
            result["extensions"] = extensions
        return result

    def _provider(self) -> ResourceProvider:
        if not self.resources:
            raise MethodNotFound("This server offers no resources (it does not declare the resources capability).")
        return self.resources

    def _list(self, request: RequestInfo, key: str, entries: Any, fields: frozenset[str]) -> dict[str, Any]:
        revision = request.revision
        listing = [definition_for(entry, fields, revision) for entry in entries]
        items, next_cursor = page(listing, request.params.get("cursor"), self.options.page_size)
        result: dict[str, Any] = {key: items}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return with_cache_hints(result, revision, self.options.ttl_ms, list_cache_scope(request, self.options))

    def list_resources(self, request: RequestInfo) -> dict[str, Any]:
        """The provider lists only what the caller may read (asked per request)."""
        entries = self._provider().resources(request)
        return self._list(request, "resources", entries, request.revision.resource_fields)

    def list_templates(self, request: RequestInfo) -> dict[str, Any]:
        entries = self._provider().templates(request)
        return self._list(request, "resourceTemplates", entries, request.revision.template_fields)

    def read(self, request: RequestInfo) -> dict[str, Any]:
        provider = self._provider()
        uri = _uri(request)
        revision = request.revision
        match = provider.find(uri)
        if match is None:
            raise not_found(uri, revision)
        try:
            outcome = self.rounds.run(request, uri, {}, lambda: match.read(request), self.sessions)
        except ResourceNotFound:
            raise not_found(uri, revision) from None
        except MissingClientCapability as exc:
            raise legacy_capability_error(exc, revision) from None
        if isinstance(outcome, Interim):
            return outcome.result
        if outcome is None or not outcome.contents:
            raise not_found(uri, revision)  # never an empty contents array
        result: dict[str, Any] = {"contents": [contents_for(item, revision) for item in outcome.contents]}
        ttl_ms, scope = self._read_hints(outcome, request)
        return with_cache_hints(result, revision, ttl_ms, scope)

    def _read_hints(self, outcome: ReadOutcome, request: RequestInfo) -> tuple[int, str]:
        """The resource's own hints, else the server's; a read that answered an
        ``input_required`` result is not cacheable; an authenticated caller's
        read is private unless the resource says otherwise."""
        if is_retry(request):
            return 0, "private"
        ttl_ms = self.options.ttl_ms if outcome.ttl_ms is None else outcome.ttl_ms
        scope = outcome.cache_scope
        if scope is None:
            scope = "private" if request.auth is not None else self.options.cache_scope
        return ttl_ms, scope

    def subscribe(self, request: RequestInfo) -> dict[str, Any]:
        """Legacy ``resources/subscribe`` and ``unsubscribe``: acknowledged for a
        resource we serve. Updates would travel on a GET stream, which this
        server does not open, so ``resources.subscribe`` is not advertised."""
        uri = _uri(request)
        if self._provider().find(uri) is None:
            raise not_found(uri, request.revision)
        return {}


def list_cache_scope(request: RequestInfo, options: ProtocolOptions) -> str:
    """A list shown to an authenticated caller holds only what its token
    permits, so no shared cache may hand it to another caller."""
    return "private" if request.auth is not None else options.cache_scope


def _uri(request: RequestInfo) -> str:
    uri = request.params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise InvalidParams(f"{request.method} needs params.uri, the URI of a resource.")
    return uri


def not_found(uri: str, revision: Revision) -> MCPError:
    """Unknown resource: ``-32002`` on legacy revisions, ``-32602`` on 2026-07-28."""
    return MCPError(
        f"Resource not found: {uri}. Call resources/list and resources/templates/list for what this server offers.",
        code=revision.resource_not_found_code,
        data={"uri": uri},
    )


def legacy_capability_error(exc: MissingClientCapability, revision: Revision) -> MCPError:
    """A missing client capability: ``-32021`` with HTTP 400 on 2026-07-28; a
    legacy session has no such status rule, so its error travels at 200."""
    if revision.stateless:
        return exc
    return MCPError(exc.message, code=exc.code, data=exc.data, http_status=200)
