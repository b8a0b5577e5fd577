"""The skills extension (SEP-2640, ``io.modelcontextprotocol/skills``): ``skills/list``,
``skills/get`` and, when enabled, ``resources/directory/read``.

Skill files themselves are ordinary resources: ``resources/read`` serves them
through the resource provider, so this module only lists and describes skills.
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidParams, MethodNotFound
from .info import ProtocolOptions
from .pagination import page
from .providers import SkillProvider
from .request_info import RequestInfo
from .resource_methods import list_cache_scope
from .shaping import with_cache_hints
from .versions import Revision

#: The extension's identifier (capability ``extensions`` key).
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
#: The ``mimeType`` of a directory resource.
DIRECTORY_MIME_TYPE = "inode/directory"


class SkillMethods:
    """The skills feature of the core."""

    def __init__(self, skills: SkillProvider | None, *, options: ProtocolOptions) -> None:
        self.skills = skills
        self.options = options

    def table(self) -> dict[str, Any]:
        return {
            "skills/list": self.list_skills,
            "skills/get": self.get_skill,
            "resources/directory/read": self.read_directory,
        }

    def capabilities(self, revision: Revision, live: bool) -> dict[str, Any]:
        """The extension, once a skill is registered, on the revisions that carry
        it. Its files are resources, so the resources feature declares
        ``resources`` (the extension requires it) as soon as a skill exists."""
        if not self.skills or not revision.skills:
            return {}
        settings = {"directoryRead": True} if self.options.skills_directory_read else {}
        return {"extensions": {SKILLS_EXTENSION: settings}}

    def _provider(self, request: RequestInfo) -> SkillProvider:
        if not self.skills or not request.revision.skills:
            raise MethodNotFound(
                f"This server does not declare the skills extension ({SKILLS_EXTENSION}), "
                f"so it does not answer {request.method}."
            )
        return self.skills

    def list_skills(self, request: RequestInfo) -> dict[str, Any]:
        entries = self._provider(request).entries(request)
        items, next_cursor = page(entries, request.params.get("cursor"), self.options.page_size)
        result: dict[str, Any] = {"skills": items}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return with_cache_hints(result, request.revision, self.options.ttl_ms, list_cache_scope(request, self.options))

    def get_skill(self, request: RequestInfo) -> dict[str, Any]:
        provider = self._provider(request)
        uri = _uri(request, "the URI of a skill's SKILL.md")
        entry = provider.entry(uri, request)
        if entry is None:
            raise InvalidParams(
                f"No skill is served at {uri}: skills/get takes the URI of a skill's SKILL.md "
                "(skills/list lists them).",
                data={"uri": uri},
            )
        scope = "private" if request.auth is not None else self.options.cache_scope
        return with_cache_hints({"skill": entry}, request.revision, self.options.ttl_ms, scope)

    def read_directory(self, request: RequestInfo) -> dict[str, Any]:
        provider = self._provider(request)
        if not self.options.skills_directory_read:
            raise MethodNotFound(
                "This server does not offer resources/directory/read (it does not declare directoryRead); "
                "a skill's entry from skills/list or skills/get lists all of its files."
            )
        uri = _uri(request, "the URI of a directory resource")
        children = provider.directory(uri, request)
        if children is None:
            raise InvalidParams(
                f"{uri} is not a directory resource of this server: resources/directory/read takes a skill's "
                "root (its SKILL.md URI without /SKILL.md) or one of its subdirectories.",
                data={"uri": uri},
            )
        items, next_cursor = page(children, request.params.get("cursor"), self.options.page_size)
        result: dict[str, Any] = {"resources": items}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return result


def _uri(request: RequestInfo, what: str) -> str:
    uri = request.params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise InvalidParams(f"{request.method} needs params.uri, {what}.")
    return uri
