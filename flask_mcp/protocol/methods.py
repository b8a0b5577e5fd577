"""The MCP methods the core serves, and how their results are shaped per
revision: lifecycle (``initialize``, ``ping``, ``server/discover``), logging
level and tools here; resources, prompts and completion in modules of their
own, gathered into one table."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from . import jsonrpc
from .errors import InternalError, InvalidParams, MissingClientCapability
from .headers import check_param_headers
from .info import ProtocolOptions, ServerInfo
from .input_requests import ASKING_CAPABILITIES
from .meta import LOG_LEVELS
from .pagination import page
from .prompt_methods import CompletionMethods, PromptMethods
from .providers import CompletionProvider, PromptProvider, ResourceProvider, SkillProvider
from .queued_tasks import resume
from .request_info import InvalidToolArguments, RequestInfo, ToolEntry, ToolOutcome, ToolProvider
from .resource_methods import ResourceMethods
from .round_trips import Interim, RoundTrips
from .session import SessionStore
from .shaping import shape_tool_result
from .skill_methods import SkillMethods
from .subscriptions import RESOURCE_UPDATES, TASK_STATUS
from .task_methods import Tasks
from .task_records import FAILED, TASKS_EXTENSION, TERMINAL, TaskRecord
from .versions import REVISIONS, SUPPORTED_VERSIONS, Revision

Instructions = Callable[[RequestInfo], "str | None"]
Handler = Callable[[RequestInfo], dict[str, Any]]


class Methods:
    """Handlers for the methods of the core, each taking the request and
    returning its result (or raising an ``MCPError``)."""

    def __init__(
        self,
        *,
        info: ServerInfo,
        tools: ToolProvider,
        sessions: SessionStore,
        options: ProtocolOptions,
        instructions: Instructions | None = None,
        state_key: Callable[[], bytes] | None = None,
        list_changed: bool = False,
        resources: ResourceProvider | None = None,
        prompts: PromptProvider | None = None,
        completions: CompletionProvider | None = None,
        clock: Callable[[], float] = time.time,
        tasks: Tasks | None = None,
        skills: SkillProvider | None = None,
    ) -> None:
        self.info = info
        #: The tasks extension, when the backend keeps tasks.
        self.tasks = tasks
        self._task_tools: tuple[int, bool] | None = None
        #: ``serverInfo`` per revision, built once: answers only serialize it.
        self.server_info = {version: info.for_revision(revision) for version, revision in REVISIONS.items()}
        #: Change notifications can be delivered (a bus carries them to listen streams).
        self.list_changed = list_changed
        self.tools = tools
        self.sessions = sessions
        self.options = options
        self.instructions = instructions
        self.state_key = state_key
        self.clock = clock
        self._tool_listings: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        #: Whole listings with their JSON prepared, per revision, keyed by the listing they copy.
        self._prepared_listings: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
        #: Capabilities per revision, with the tools' generation they were built at.
        self._capabilities: dict[str, tuple[int, dict[str, Any]]] = {}
        self._cache_lock = threading.Lock()
        self.rounds = RoundTrips(state_key, lambda: self.clock())  # self.clock may be replaced (tests)
        self.features = (
            ResourceMethods(resources, options=options, rounds=self.rounds, sessions=sessions),
            PromptMethods(prompts, options=options, rounds=self.rounds, sessions=sessions),
            CompletionMethods(completions),
            SkillMethods(skills, options=options),
        )

    def table(self) -> dict[str, Handler]:
        """Method name -> handler (each revision says which of them it offers)."""
        return {
            "initialize": self.initialize,
            "ping": self.ping,
            "server/discover": self.discover,
            "logging/setLevel": self.set_level,
            "tools/list": self.list_tools,
            "tools/call": self.call_tool,
        } | {method: handler for feature in self.features for method, handler in feature.table().items()} | (
            self.tasks.table() if self.tasks is not None else {}
        )

    def forget_cached(self) -> None:
        """Drop what was prepared from the registered features (capabilities):
        to be called whenever resources, prompts or completions are added or
        removed (tools are noticed through their ``generation``)."""
        with self._cache_lock:
            self._capabilities = {}

    def capabilities(self, revision: Revision) -> dict[str, Any]:
        """What this server offers in ``revision``, built once per revision and
        set of features (``initialize`` and ``server/discover`` serve it as it
        is: callers must not change it)."""
        generation = self.tools.generation
        cached = self._capabilities.get(revision.version)
        if cached is not None and cached[0] == generation:
            return cached[1]
        cache = self._capabilities
        built = self._build_capabilities(revision)
        with self._cache_lock:
            if cache is self._capabilities:  # nothing changed while it was built
                cache[revision.version] = (generation, built)
        return built

    def _build_capabilities(self, revision: Revision) -> dict[str, Any]:
        # logging: tools may log through their Context (deprecated in 2026-07-28, still served).
        capabilities: dict[str, Any] = {"logging": {}, "tools": {}}
        if self.list_changed and revision.stateless:
            # Delivered on subscriptions/listen streams; legacy clients would need a
            # GET stream, which this server does not open.
            capabilities["tools"] = {"listChanged": True}
        live = self.list_changed and revision.stateless
        for feature in self.features:  # resources, prompts, completions, skills: once registered
            for key, value in feature.capabilities(revision, live).items():
                capabilities[key] = {**capabilities.get(key, {}), **value} if key == "extensions" else value
        if revision.stateless and self._offers_tasks():
            capabilities["extensions"] = {**capabilities.get("extensions", {}), TASKS_EXTENSION: {}}
        return capabilities

    def _offers_tasks(self) -> bool:
        """The tasks extension is declared once a tool may run as a task (and the backend keeps tasks)."""
        if self.tasks is None:
            return False
        generation = self.tools.generation
        if self._task_tools is None or self._task_tools[0] != generation:
            found = any(
                (tool := self.tools.find(d["name"])) is not None and tool.task_support is not None
                for d in self.tools.definitions()
            )
            self._task_tools = (generation, found)
        return self._task_tools[1]

    def durable_tool(self, name: object) -> bool:
        """Whether calls of the tool ``name`` are durable (``@mcp.tool(durable=...)``;
        task tools are unless they opt out)."""
        tool = self.tools.find(name) if isinstance(name, str) else None
        return tool is not None and bool(getattr(tool, "durable", False))

    def rerun_allowed(self, name: object) -> bool:
        """Whether a task queue may run the tool ``name`` again after its worker died."""
        tool = self.tools.find(name) if isinstance(name, str) else None
        return tool is None or bool(getattr(tool, "task_rerun", True))

    def listen_offer(self, revision: Revision) -> frozenset[str]:
        """The change notifications a listen stream can get: list kinds whose
        capability says ``listChanged``, plus ``RESOURCE_UPDATES`` when resource
        updates are delivered (``resources.subscribe``)."""
        caps = self.capabilities(revision)
        kinds = {kind for kind in ("tools", "prompts", "resources") if caps.get(kind, {}).get("listChanged")}
        if caps.get("resources", {}).get("subscribe"):
            kinds.add(RESOURCE_UPDATES)
        if revision.stateless and self._offers_tasks() and self.list_changed:
            kinds.add(TASK_STATUS)  # notifications/tasks, for the taskIds a stream names
        return frozenset(kinds)

    def _instructions_for(self, request: RequestInfo) -> str | None:
        if self.instructions is None:
            return None
        return self.instructions(request)

    def initialize(self, request: RequestInfo) -> dict[str, Any]:
        result: dict[str, Any] = {
            "protocolVersion": request.revision.version,
            "capabilities": self.capabilities(request.revision),
            "serverInfo": self.server_info[request.revision.version],
        }
        text = self._instructions_for(request)
        if text:
            result["instructions"] = text
        return result

    def ping(self, request: RequestInfo) -> dict[str, Any]:
        return {}

    def discover(self, request: RequestInfo) -> dict[str, Any]:
        revision = request.revision
        result: dict[str, Any] = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self.capabilities(revision),
        }
        text = self._instructions_for(request)
        if text:
            result["instructions"] = text
        return self._with_cache_hints(result, revision)

    def set_level(self, request: RequestInfo) -> dict[str, Any]:
        level = request.params.get("level")
        if level not in LOG_LEVELS:
            raise InvalidParams(f"logging/setLevel needs params.level, one of {', '.join(LOG_LEVELS)}.")
        assert request.session is not None
        request.session.log_level = level
        self.sessions.save(request.session)
        return {}

    def _with_cache_hints(self, result: dict[str, Any], revision: Revision) -> dict[str, Any]:
        if revision.cache_hints:
            result["ttlMs"] = self.options.ttl_ms
            result["cacheScope"] = self.options.cache_scope
        return result

    def _whole_listing(self, revision: Revision, listing: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The listing as one page, its JSON prepared once per revision and set
        of tools (answers copy the bytes instead of serializing 50 schemas)."""
        cached = self._prepared_listings.get(revision.version)
        if cached is not None and cached[0] is listing:
            return cached[1]
        prepared = jsonrpc.prepared_list(listing)
        self._prepared_listings[revision.version] = (listing, prepared)
        return prepared

    def _tool_listing(self, revision: Revision) -> list[dict[str, Any]]:
        """The tools as this revision knows them, rebuilt only when the set changes."""
        generation = self.tools.generation
        cached = self._tool_listings.get(revision.version)
        if cached is not None and cached[0] == generation:
            return cached[1]
        listing = [{k: v for k, v in tool.items() if k in revision.tool_fields} for tool in self.tools.definitions()]
        self._tool_listings[revision.version] = (generation, listing)
        return listing

    def list_tools(self, request: RequestInfo) -> dict[str, Any]:
        listing = self._tool_listing(request.revision)
        if request.auth is not None:  # each caller sees what it may call: filtered after the cache
            listing = [t for t in listing if (e := self.tools.find(t["name"])) is not None and e.visible_to(request)]
        cursor = request.params.get("cursor")
        if cursor is None and request.auth is None and len(listing) <= self.options.page_size:
            tools, next_cursor = self._whole_listing(request.revision, listing), None
        else:
            tools, next_cursor = page(listing, cursor, self.options.page_size)
        result: dict[str, Any] = {"tools": tools}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        result = self._with_cache_hints(result, request.revision)
        if request.auth is not None and "cacheScope" in result:
            result["cacheScope"] = "private"  # the list depends on the caller's token
        return result

    def call_tool(self, request: RequestInfo) -> dict[str, Any]:
        params = request.params
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("tools/call needs params.name, the name of a tool from tools/list.")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("tools/call params.arguments must be an object.")
        tool = self.tools.find(name)
        if tool is None:
            raise InvalidParams(f"Unknown tool {name!r}: call tools/list for the tools this server offers.")
        revision = request.revision
        if revision.stateless and tool.header_params:
            check_param_headers(request.headers, tool.header_params, arguments)
        plain = tool.task_support is None or not revision.stateless
        outcome: ToolOutcome | Interim | dict[str, Any]
        session = request.session
        try:
            if plain and (session is None or not session.data) and (not revision.stateless or (
                params.get("requestState") is None and params.get("inputResponses") is None
                and ASKING_CAPABILITIES.isdisjoint(request.client_capabilities)
            )):  # the usual call: no answers to load, no session data to compare (RoundTrips.run, without its call)
                outcome = tool.invoke(arguments, request)
                if session is not None and session.data:  # the tool kept something for the session
                    self.sessions.save(session)
            else:
                call = partial(tool.invoke, arguments, request) if plain else self._task_call(request, tool, arguments)
                outcome = self.rounds.run(request, name, arguments, call, self.sessions)
        except InvalidToolArguments as exc:
            outcome = exc.outcome(revision)
        except MissingClientCapability as exc:
            if revision.stateless:
                raise
            outcome = ToolOutcome([{"type": "text", "text": exc.message}], is_error=True)
        if isinstance(outcome, Interim):
            return outcome.result
        if isinstance(outcome, dict):  # a CreateTaskResult
            return outcome
        return shape_tool_result(outcome, revision)

    def _task_call(self, request: RequestInfo, tool: ToolEntry, arguments: dict[str, Any]) -> Callable[[], Any]:
        """A task tool's call: a task for a request that declares the extension."""
        if self.tasks is None:  # the backend keeps no tasks: an ordinary call, unless one is required
            if tool.task_support == "required":
                raise InternalError(f"Tool {tool.name!r} runs as a task, and MCP_BACKEND keeps no tasks.")
            return lambda: tool.invoke(arguments, request)
        revision = request.revision

        def shape(outcome: ToolOutcome) -> dict[str, Any]:  # the result a finished task keeps
            return {"resultType": "complete", **shape_tool_result(outcome, revision)}

        return self.tasks.tool_call(request, tool, arguments, shape)


    def resume_task(self, task_id: str, request: RequestInfo, *, repeatable: bool = True) -> str | None:
        """Run the queued task ``task_id`` here (a task queue's worker): ``request``
        is the ``tools/call`` that created it. The status it ended with, or ``None``
        when there was nothing to run (see :func:`.queued_tasks.resume`)."""
        if self.tasks is None:
            raise InternalError("MCP_BACKEND keeps no tasks: there is no task to resume.")
        name = request.params.get("name")
        tool = self.tools.find(name) if isinstance(name, str) else None
        if tool is None:
            message = f"Tool {name!r} is not registered in this worker."
            error = InternalError(message).to_error()
            self.tasks.change(task_id, lambda r: r.status not in TERMINAL and _fail(r, message, error))
            return FAILED
        arguments = request.params.get("arguments") or {}
        revision = request.revision

        def shape(outcome: ToolOutcome) -> dict[str, Any]:
            return {"resultType": "complete", **shape_tool_result(outcome, revision)}

        repeatable = repeatable and getattr(tool, "task_rerun", True)
        return resume(self.tasks, task_id, request, tool, arguments, shape, repeatable=repeatable)


def _fail(record: TaskRecord, message: str, error: dict[str, Any]) -> bool:
    record.status, record.status_message, record.error, record.input_requests = FAILED, message, error, {}
    return True
