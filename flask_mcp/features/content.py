"""Content a tool can return besides plain text and structured data; the
messages a prompt returns; the contents a resource returns."""

from __future__ import annotations

import base64
import json
import mimetypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic_core import to_jsonable_python


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _extras(block: dict[str, Any], annotations: dict[str, Any] | None, meta: dict[str, Any] | None) -> dict[str, Any]:
    if annotations:
        block["annotations"] = annotations
    if meta:
        block["_meta"] = meta
    return block


class Content:
    """Base of the content helpers: each knows its MCP content block."""

    def to_block(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass
class Text(Content):
    text: str
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None

    def to_block(self) -> dict[str, Any]:
        return _extras({"type": "text", "text": self.text}, self.annotations, self.meta)


@dataclass
class _Media(Content):
    data: bytes
    mime_type: str
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    kind = "image"

    @classmethod
    def from_file(cls, path: str | Path, mime_type: str | None = None) -> Any:
        """Read a file; the MIME type is guessed from its name when not given."""
        path = Path(path)
        guessed = mime_type or mimetypes.guess_type(path.name)[0]
        if not guessed:
            raise ValueError(f"Cannot guess the MIME type of {path.name}; pass mime_type=")
        return cls(path.read_bytes(), guessed)

    def to_block(self) -> dict[str, Any]:
        block = {"type": self.kind, "data": _b64(self.data), "mimeType": self.mime_type}
        return _extras(block, self.annotations, self.meta)


@dataclass
class Image(_Media):
    """An image, sent base64-encoded (``{"type": "image"}``)."""

    mime_type: str = "image/png"
    kind = "image"


@dataclass
class Audio(_Media):
    """An audio clip, sent base64-encoded (``{"type": "audio"}``)."""

    mime_type: str = "audio/wav"
    kind = "audio"


@dataclass
class EmbeddedResource(Content):
    """A resource's contents inside a result: ``text`` or binary ``blob``."""

    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.blob is None):
            raise ValueError("EmbeddedResource needs exactly one of text= or blob=")

    def to_block(self) -> dict[str, Any]:
        resource: dict[str, Any] = {"uri": self.uri}
        if self.mime_type:
            resource["mimeType"] = self.mime_type
        if self.text is not None:
            resource["text"] = self.text
        else:
            assert self.blob is not None
            resource["blob"] = _b64(self.blob)
        return _extras({"type": "resource", "resource": resource}, self.annotations, self.meta)


@dataclass
class ResourceLink(Content):
    """A pointer to a resource the client can read later (2025-06-18 and newer;
    older clients get the link as text)."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None

    def to_block(self) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        for key, value in (("title", self.title), ("description", self.description),
                           ("mimeType", self.mime_type), ("size", self.size)):
            if value is not None:
                block[key] = value
        return _extras(block, self.annotations, self.meta)


_NO_STRUCTURED = object()


@dataclass
class ToolResult:
    """Full control over a tool's answer: content, structured data, error flag."""

    content: list[Content | str] = field(default_factory=list)
    structured: Any = _NO_STRUCTURED
    is_error: bool = False
    meta: dict[str, Any] | None = None

    @property
    def has_structured(self) -> bool:
        return self.structured is not _NO_STRUCTURED


def as_block(item: Any) -> dict[str, Any]:
    """A content block from a helper, a string (text), a block dict (kept), or
    any other JSON-able value (its JSON as text)."""
    if isinstance(item, Content):
        return item.to_block()
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if isinstance(item, dict) and isinstance(item.get("type"), str):
        return dict(item)
    return {"type": "text", "text": json.dumps(to_jsonable_python(item), ensure_ascii=False, separators=(",", ":"))}


@dataclass
class Message:
    """One message of a prompt: a role and one content block (a helper such as
    :class:`Image` or :class:`EmbeddedResource`, a string, or a block dict)."""

    role: Literal["user", "assistant"]
    content: Any

    def to_message(self) -> dict[str, Any]:
        return {"role": self.role, "content": as_block(self.content)}


class UserMessage(Message):
    """A prompt message from the user: ``UserMessage("Review this code")``."""

    def __init__(self, content: Any) -> None:
        super().__init__("user", content)


class AssistantMessage(Message):
    """A prompt message from the assistant (e.g. a primed answer)."""

    def __init__(self, content: Any) -> None:
        super().__init__("assistant", content)


@dataclass
class ResourceContents:
    """One item of what a resource function returns: ``text`` or binary ``blob``,
    with its own ``mime_type``, ``uri`` (default: the URI read) and ``meta``."""

    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None
    uri: str | None = None
    meta: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.blob is None):
            raise ValueError("ResourceContents needs exactly one of text= or blob=")

    def to_contents(self, uri: str, mime_type: str | None = None) -> dict[str, Any]:
        """The wire item; ``uri`` and ``mime_type`` fill what this item leaves out."""
        item: dict[str, Any] = {"uri": self.uri or uri}
        chosen = self.mime_type or mime_type
        if chosen:
            item["mimeType"] = chosen
        if self.text is not None:
            item["text"] = self.text
        else:
            assert self.blob is not None
            item["blob"] = _b64(self.blob)
        if self.meta:
            item["_meta"] = dict(self.meta)
        return item

