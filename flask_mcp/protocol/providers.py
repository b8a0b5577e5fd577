"""What the core needs from the resources, prompts and completions it serves
(the counterpart of :class:`~.request_info.ToolProvider`).

Providers speak the newest revision's shapes; the core trims them for older
revisions and paginates, caches and shapes the results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .request_info import RequestInfo


@dataclass(slots=True)
class ReadOutcome:
    """A resource's contents (``TextResourceContents`` / ``BlobResourceContents``
    in the newest shape) and how long a 2026-07-28 client may cache them
    (``None``: the server's defaults)."""

    contents: list[dict[str, Any]]
    ttl_ms: int | None = None
    cache_scope: str | None = None


@dataclass(slots=True)
class PromptOutcome:
    """A prompt's messages (``{"role", "content"}``, content blocks in the newest
    shape) and its description."""

    messages: list[dict[str, Any]]
    description: str | None = None


@dataclass(slots=True)
class CompletionOutcome:
    """Suggestions for an argument's value (the core keeps at most 100)."""

    values: list[str] = field(default_factory=list)
    total: int | None = None
    has_more: bool | None = None


class ResourceMatch(Protocol):
    """A resource (or a template instance) that a URI named."""

    def read(self, request: RequestInfo) -> ReadOutcome | None:
        """The contents (after checking the caller's scopes: 403); ``None`` (or no
        contents) when the resource does not exist."""


class ResourceProvider(Protocol):
    def __len__(self) -> int:
        """How many resources and templates there are (none: no ``resources`` capability)."""

    def resources(self, request: RequestInfo) -> Sequence[dict[str, Any]]:
        """Every ``Resource`` the caller may read, in a deterministic order (per
        request: the caller's scopes and the endpoint's URL shape the list)."""

    def templates(self, request: RequestInfo) -> Sequence[dict[str, Any]]:
        """Every ``ResourceTemplate`` the caller may read, in a deterministic order."""

    def find(self, uri: str) -> ResourceMatch | None:
        """The resource this URI names, or ``None``."""

    def extensions(self) -> dict[str, dict[str, Any]]:
        """Capability ``extensions`` the resources call for (e.g. MCP Apps)."""


class PromptEntry(Protocol):
    def render(self, arguments: dict[str, Any], request: RequestInfo) -> PromptOutcome:
        """Check the caller's scopes (403), validate the arguments (``InvalidParams``
        when they do not fit), call, convert."""

    def visible_to(self, request: RequestInfo) -> bool:
        """Whether ``prompts/list`` shows it to the caller (asked only when ``request.auth`` is set)."""


class PromptProvider(Protocol):
    def __len__(self) -> int: ...

    def definitions(self) -> Sequence[dict[str, Any]]:
        """Every ``Prompt`` in a deterministic order."""

    def find(self, name: str) -> PromptEntry | None: ...


class CompletionProvider(Protocol):
    def __len__(self) -> int:
        """How many completers there are (none: no ``completions`` capability)."""

    def complete(
        self, ref: dict[str, Any], argument: str, value: str, context: dict[str, str], request: RequestInfo
    ) -> CompletionOutcome:
        """Suggestions for ``argument`` of the prompt or resource template ``ref``
        names (``InvalidParams`` for a reference to nothing we serve; 403 when the
        caller may not use what it names)."""


class SkillProvider(Protocol):
    """The skills of the skills extension (SEP-2640), whose files are resources
    too (the resource provider serves their ``resources/read``)."""

    def __len__(self) -> int:
        """How many skills there are (none: the extension is not declared)."""

    def entries(self, request: RequestInfo) -> Sequence[dict[str, Any]]:
        """Every ``Skill`` entry (``uri``, ``frontmatter``, ``resources``) the caller
        may read, in a deterministic order; each entry whole (never split)."""

    def entry(self, uri: str, request: RequestInfo) -> dict[str, Any] | None:
        """The entry of the skill whose ``SKILL.md`` is at ``uri``, listed or not
        (403 when the caller may not read it); ``None`` when no skill is there."""

    def directory(self, uri: str, request: RequestInfo) -> list[dict[str, Any]] | None:
        """The ``Resource`` entries of a directory's direct children (subdirectories
        with ``mimeType: "inode/directory"``); ``None`` when ``uri`` names no
        directory the caller may read."""
