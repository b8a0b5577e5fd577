"""``prompts/list`` and ``prompts/get`` (which may ask the client for input
on 2026-07-28), and ``completion/complete`` for prompt and template arguments."""

from __future__ import annotations

from typing import Any

from .errors import InvalidParams, MethodNotFound, MissingClientCapability
from .info import ProtocolOptions
from .pagination import page
from .providers import CompletionProvider, PromptProvider
from .request_info import RequestInfo
from .resource_methods import legacy_capability_error, list_cache_scope
from .round_trips import Interim, RoundTrips
from .session import SessionStore
from .shaping import block_for, definition_for, with_cache_hints
from .versions import Revision

#: The most values one ``completion/complete`` result may carry.
MAX_COMPLETION_VALUES = 100


class PromptMethods:
    """The ``prompts`` feature of the core."""

    def __init__(
        self,
        prompts: PromptProvider | None,
        *,
        options: ProtocolOptions,
        rounds: RoundTrips,
        sessions: SessionStore,
    ) -> None:
        self.prompts = prompts
        self.options = options
        self.rounds = rounds
        self.sessions = sessions

    def table(self) -> dict[str, Any]:
        return {"prompts/list": self.list_prompts, "prompts/get": self.get_prompt}

    def capabilities(self, revision: Revision, live: bool) -> dict[str, Any]:
        """``prompts`` once one is registered; ``listChanged`` where it is
        delivered (``live``: 2026-07-28 listen streams over a bus)."""
        if not self.prompts:
            return {}
        return {"prompts": {"listChanged": True} if live else {}}

    def _provider(self) -> PromptProvider:
        if not self.prompts:
            raise MethodNotFound("This server offers no prompts (it does not declare the prompts capability).")
        return self.prompts

    def list_prompts(self, request: RequestInfo) -> dict[str, Any]:
        revision = request.revision
        listing = [_prompt_for(prompt, revision) for prompt in self._visible(request)]
        items, next_cursor = page(listing, request.params.get("cursor"), self.options.page_size)
        result: dict[str, Any] = {"prompts": items}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return with_cache_hints(result, revision, self.options.ttl_ms, list_cache_scope(request, self.options))

    def _visible(self, request: RequestInfo) -> list[dict[str, Any]]:
        """The prompts this caller may get: each caller sees its own list, so
        the filter runs per request, after whatever the provider keeps."""
        provider = self._provider()
        definitions = list(provider.definitions())
        if request.auth is None:
            return definitions  # no authentication, no scopes to check
        return [d for d in definitions if (p := provider.find(d["name"])) is not None and p.visible_to(request)]

    def get_prompt(self, request: RequestInfo) -> dict[str, Any]:
        provider = self._provider()
        params = request.params
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("prompts/get needs params.name, the name of a prompt from prompts/list.")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("prompts/get params.arguments must be an object of strings.")
        prompt = provider.find(name)
        if prompt is None:
            raise InvalidParams(f"Unknown prompt {name!r}: call prompts/list for the prompts this server offers.")
        revision = request.revision
        try:
            outcome = self.rounds.run(
                request, name, arguments, lambda: prompt.render(arguments, request), self.sessions
            )
        except MissingClientCapability as exc:
            raise legacy_capability_error(exc, revision) from None
        if isinstance(outcome, Interim):
            return outcome.result
        result: dict[str, Any] = {}
        if outcome.description:
            result["description"] = outcome.description
        result["messages"] = [
            {"role": message["role"], "content": block_for(message["content"], revision)}
            for message in outcome.messages
        ]
        return result


class CompletionMethods:
    """``completion/complete``: suggestions for prompt and template arguments."""

    def __init__(self, completions: CompletionProvider | None) -> None:
        self.completions = completions

    def table(self) -> dict[str, Any]:
        return {"completion/complete": self.complete}

    def capabilities(self, revision: Revision, live: bool) -> dict[str, Any]:
        return {"completions": {}} if self.completions else {}

    def complete(self, request: RequestInfo) -> dict[str, Any]:
        if not self.completions:
            raise MethodNotFound("This server offers no completions (it does not declare the completions capability).")
        params = request.params
        ref = params.get("ref")
        if not isinstance(ref, dict) or not _valid_ref(ref):
            raise InvalidParams(
                'completion/complete needs params.ref: {"type": "ref/prompt", "name": ...} or '
                '{"type": "ref/resource", "uri": <a resource template>}.'
            )
        argument = params.get("argument")
        if not isinstance(argument, dict) or not isinstance(argument.get("name"), str) or not isinstance(
            argument.get("value"), str
        ):
            raise InvalidParams('completion/complete needs params.argument: {"name": ..., "value": ...} (strings).')
        context = _context_arguments(params) if request.revision.completion_context else {}
        outcome = self.completions.complete(ref, argument["name"], argument["value"], context, request)
        values = [v for v in outcome.values if isinstance(v, str)]
        truncated = len(values) > MAX_COMPLETION_VALUES
        completion: dict[str, Any] = {"values": values[:MAX_COMPLETION_VALUES]}
        total = outcome.total if outcome.total is not None else (len(values) if truncated else None)
        has_more = outcome.has_more if outcome.has_more is not None else (True if truncated else None)
        if total is not None:
            completion["total"] = total
        if has_more is not None:
            completion["hasMore"] = has_more
        return {"completion": completion}


def _context_arguments(params: dict[str, Any]) -> dict[str, str]:
    """``context.arguments``: the values of the other arguments so far (2025-06-18+)."""
    context = params.get("context")
    given = context.get("arguments") if isinstance(context, dict) else None
    if not isinstance(given, dict):
        return {}
    return {k: v for k, v in given.items() if isinstance(v, str)}


def _valid_ref(ref: dict[str, Any]) -> bool:
    if ref.get("type") == "ref/prompt":
        return isinstance(ref.get("name"), str)
    return ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str)


def _prompt_for(prompt: dict[str, Any], revision: Revision) -> dict[str, Any]:
    shaped = definition_for(prompt, revision.prompt_fields, revision)
    if "arguments" in shaped:
        fields = revision.prompt_argument_fields
        shaped["arguments"] = [{k: v for k, v in arg.items() if k in fields} for arg in shaped["arguments"]]
    return shaped
