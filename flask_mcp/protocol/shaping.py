"""Shaping what the features produce (in the newest revision's form) for the
revision of a request: content blocks, resource contents, definitions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .meta import SERVER_INFO_KEY
from .versions import Revision

if TYPE_CHECKING:
    from .request_info import ToolOutcome

#: The keys of the commonest block, plain text: the same in every revision.
PLAIN_TEXT_KEYS = frozenset({"type", "text"})


def block_for(block: dict[str, Any], revision: Revision) -> dict[str, Any]:
    """A content block as this revision knows it: unknown types as text, and
    no block ``_meta`` or ``annotations.lastModified`` where they do not exist."""
    if block.keys() == PLAIN_TEXT_KEYS and block["type"] == "text":
        return block
    if block.get("type") not in revision.content_types:
        block = _as_text_block(block)
    if not revision.content_meta:
        block = _without_newer_meta(block)
    if block.get("type") == "resource" and isinstance(block.get("resource"), dict):
        block = {**block, "resource": contents_for(block["resource"], revision)}
    return block


def contents_for(contents: dict[str, Any], revision: Revision) -> dict[str, Any]:
    """One ``resources/read`` contents item (text or blob) for this revision."""
    return contents if revision.content_meta else {k: v for k, v in contents.items() if k != "_meta"}


def definition_for(entry: dict[str, Any], fields: Iterable[str], revision: Revision) -> dict[str, Any]:
    """A resource, template or prompt definition keeping only the keys this
    revision defines (its annotations too)."""
    allowed = frozenset(fields)
    trimmed = {k: v for k, v in entry.items() if k in allowed}
    if not revision.content_meta and isinstance(trimmed.get("annotations"), dict):
        trimmed["annotations"] = {k: v for k, v in trimmed["annotations"].items() if k != "lastModified"}
    return trimmed


def _without_newer_meta(block: dict[str, Any]) -> dict[str, Any]:
    annotations = block.get("annotations")
    block = {k: v for k, v in block.items() if k != "_meta"}
    if isinstance(annotations, dict) and "lastModified" in annotations:
        block["annotations"] = {k: v for k, v in annotations.items() if k != "lastModified"}
    return block


def _as_text_block(block: dict[str, Any]) -> dict[str, Any]:
    """Older revisions lack some block types (resource links): say it in text."""
    if block.get("type") == "resource_link":
        label = block.get("title") or block.get("name") or block.get("uri")
        return {"type": "text", "text": f"{label}: {block.get('uri')}"}
    return {"type": "text", "text": str(block)}


def with_cache_hints(result: dict[str, Any], revision: Revision, ttl_ms: int, cache_scope: str) -> dict[str, Any]:
    """``ttlMs`` and ``cacheScope`` where the revision has them (2026-07-28)."""
    if revision.cache_hints:
        result["ttlMs"] = ttl_ms
        result["cacheScope"] = cache_scope
    return result


def shape_tool_result(outcome: ToolOutcome, revision: Revision) -> dict[str, Any]:
    """A ``tools/call`` result for this revision (content, structured content, error flag)."""
    content = outcome.content
    if not (len(content) == 1 and content[0].keys() == PLAIN_TEXT_KEYS and content[0]["type"] == "text"):
        content = [block_for(block, revision) for block in content]  # (one text block: the same in every revision)
    result: dict[str, Any] = {"content": content}
    if outcome.has_structured and revision.structured_output:
        result["structuredContent"] = outcome.structured
    if outcome.is_error:
        result["isError"] = True
    if outcome.meta:
        result["_meta"] = dict(outcome.meta)
    return result


def finish_result(result: dict[str, Any], revision: Revision, server_info: Mapping[str, Any]) -> dict[str, Any]:
    """A method's result as the revision sends it: from 2026-07-28 on, every
    result says its type and which server answered (``server_info`` by version)."""
    if revision.result_type:
        result.setdefault("resultType", "complete")
        result.setdefault("_meta", {})[SERVER_INFO_KEY] = server_info[revision.version]
    return result
