"""End to end: the official Python MCP client (``mcp`` 2.3.0) reads skills from
a server under real gunicorn (two workers), on 2026-07-28 and on a 2025-11-25
session, and checks every file it reads against the manifest's SHA-256 digest
and size -- as a host must before it uses a skill's content.

The SDK has no skills methods, so ``skills/list`` and ``skills/get`` go through
its generic ``session.send_request`` with result models written here.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import BlobResourceContents, PaginatedRequestParams, Request, RequestParams, Result, TextResourceContents
from pydantic import ConfigDict

from flask_mcp.features.skills.frontmatter import parse, split

pytestmark = pytest.mark.e2e

T = TypeVar("T")
RUNBOOK = "skill://ops/deploy-runbook/SKILL.md"
PAYROLL = "skill://payroll-guide/SKILL.md"
GENERATED = "skill://caller-card/SKILL.md"
MODES = ["2026-07-28", "legacy"]  # Client(mode=...): stateless, or a 2025-11-25 session


class ListSkillsRequest(Request[PaginatedRequestParams, Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"
    params: PaginatedRequestParams


class GetSkillParams(RequestParams):
    uri: str


class GetSkillRequest(Request[GetSkillParams, Literal["skills/get"]]):
    method: Literal["skills/get"] = "skills/get"
    params: GetSkillParams


class DirectoryParams(RequestParams):
    uri: str
    cursor: str | None = None


class ReadDirectoryRequest(Request[DirectoryParams, Literal["resources/directory/read"]]):
    method: Literal["resources/directory/read"] = "resources/directory/read"
    params: DirectoryParams


class SkillsResult(Result):
    model_config = ConfigDict(extra="allow")
    skills: list[dict[str, Any]]
    nextCursor: str | None = None  # noqa: N815 - the wire name


class SkillResult(Result):
    model_config = ConfigDict(extra="allow")
    skill: dict[str, Any]


class DirectoryResult(Result):
    model_config = ConfigDict(extra="allow")
    resources: list[dict[str, Any]]
    nextCursor: str | None = None  # noqa: N815


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


@asynccontextmanager
async def client(url: str, token: str, mode: str) -> AsyncIterator[Client]:
    """The official client with a bearer token (its response cache off: every call reaches the server)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=20) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as c:
            yield c


async def list_skills(c: Client) -> SkillsResult:
    pages: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await c.session.send_request(ListSkillsRequest(params=PaginatedRequestParams(cursor=cursor)),
                                            SkillsResult)
        pages.extend(page.skills)
        cursor = page.nextCursor
        if cursor is None:
            page.skills = pages
            return page


async def read_bytes(c: Client, uri: str) -> bytes:
    result = await c.read_resource(uri)
    (contents,) = result.contents
    if isinstance(contents, TextResourceContents):
        return contents.text.encode("utf-8")
    assert isinstance(contents, BlobResourceContents)
    return base64.b64decode(contents.blob)


def verified(data: bytes, entry: dict[str, Any]) -> bytes:
    """What a host does before using a file: size, then digest, against the manifest."""
    assert len(data) == entry["size"], entry["uri"]
    assert "sha256:" + hashlib.sha256(data).hexdigest() == entry["digest"], entry["uri"]
    return data


@pytest.fixture(scope="module")
def server() -> Any:
    from conftest import GunicornServer

    started = GunicornServer("tests.skills_app:app", workers=2)
    yield started
    started.stop()


@pytest.mark.parametrize("mode", MODES)
def test_the_official_client_reads_a_folder_skill_and_every_file_matches_its_manifest(server: Any, mode: str) -> None:
    async def scenario() -> tuple[SkillsResult, dict[str, Any], dict[str, bytes]]:
        async with client(server.url, "plain-token", mode) as c:
            assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            listing = await list_skills(c)
            entry = next(s for s in listing.skills if s["uri"] == RUNBOOK)
            files = {r["uri"]: verified(await read_bytes(c, r["uri"]), r) for r in entry["resources"]}
            return listing, entry, files

    listing, entry, files = run(scenario())

    assert [r["uri"] for r in entry["resources"]] == [
        RUNBOOK,
        "skill://ops/deploy-runbook/assets/diagram.png",
        "skill://ops/deploy-runbook/references/rollback.md",
    ]
    assert files["skill://ops/deploy-runbook/assets/diagram.png"].startswith(b"\x89PNG")  # served as a blob
    # The entry's front matter is the file's, as a YAML 1.2 parser reads it (dates and "yes" stay strings).
    text = files[RUNBOOK].decode()
    assert entry["frontmatter"] == parse(text, "SKILL.md")
    assert entry["frontmatter"]["metadata"] == {"owner": "platform team", "reviewed": "2026-11-02", "on-call": "yes"}
    assert split(text)[1].lstrip().startswith("# Deploying")
    if mode == "legacy":
        assert listing.model_extra is not None and "ttlMs" not in listing.model_extra
    else:
        assert listing.model_extra is not None and listing.model_extra["ttlMs"] >= 0
        assert listing.model_extra["cacheScope"] == "private"  # an authenticated caller's listing


@pytest.mark.parametrize("mode", MODES)
def test_a_scoped_skill_is_listed_and_served_only_to_a_token_with_its_scope(server: Any, mode: str) -> None:
    async def as_caller(token: str) -> tuple[set[str], Any, Any]:
        async with client(server.url, token, mode) as c:
            uris = {s["uri"] for s in (await list_skills(c)).skills}
            try:
                got: Any = await c.session.send_request(GetSkillRequest(params=GetSkillParams(uri=PAYROLL)),
                                                        SkillResult)
            except MCPError as exc:
                got = exc
            try:
                read: Any = await read_bytes(c, PAYROLL)
            except MCPError as exc:
                read = exc
            return uris, got, read

    plain_uris, plain_get, plain_read = run(as_caller("plain-token"))
    clerk_uris, clerk_get, clerk_read = run(as_caller("payroll-token"))

    assert PAYROLL not in plain_uris and RUNBOOK in plain_uris
    assert isinstance(plain_get, MCPError) and "payroll:read" in str(plain_get)
    assert isinstance(plain_read, MCPError) and "payroll:read" in str(plain_read)
    assert PAYROLL in clerk_uris
    (manifest,) = clerk_get.skill["resources"]
    assert verified(clerk_read, manifest).startswith(b"---\nname: payroll-guide\n")


@pytest.mark.parametrize("mode", MODES)
def test_a_generated_skill_is_dynamic_and_its_front_matter_reads_back_as_listed(server: Any, mode: str) -> None:
    async def scenario() -> tuple[dict[str, Any], bytes, bytes, list[dict[str, Any]]]:
        async with client(server.url, "payroll-token", mode) as c:
            got = await c.session.send_request(GetSkillRequest(params=GetSkillParams(uri=GENERATED)), SkillResult)
            skill_md = await read_bytes(c, GENERATED)
            children = await c.session.send_request(
                ReadDirectoryRequest(params=DirectoryParams(uri="skill://caller-card/notes")), DirectoryResult)
            note = await read_bytes(c, children.resources[0]["uri"])
            return got.skill, skill_md, note, children.resources

    entry, skill_md, note, children = run(scenario())

    assert entry["resources"] == "dynamic"
    assert entry["frontmatter"] == {
        "name": "caller-card", "description": "Say who is calling (generated on each read).",
        "metadata": {"generated": "per read"},
    }
    # What the host compares before loading it: the file's front matter, field by field, by a YAML parser.
    block, body = split(skill_md.decode())
    assert yaml.safe_load(block or "") == entry["frontmatter"]
    assert "You are clerk." in body
    assert children == [{"uri": "skill://caller-card/notes/who.txt", "name": "who.txt", "mimeType": "text/plain",
                         "size": len(b"clerk")}]
    assert note == b"clerk"


def test_an_unknown_skill_is_invalid_params_for_the_official_client(server: Any) -> None:
    async def scenario() -> MCPError:
        async with client(server.url, "plain-token", "2026-07-28") as c:
            with pytest.raises(MCPError) as caught:
                await c.session.send_request(
                    GetSkillRequest(params=GetSkillParams(uri="skill://nowhere/SKILL.md")), SkillResult)
            return caught.value

    error = run(scenario())

    assert error.error.code == -32602
    assert "skill://nowhere/SKILL.md" in error.error.message


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_example_bookshop_serves_its_desk_runbook_skill(example_server: Any, mode: str) -> None:
    async def scenario() -> tuple[Any, list[dict[str, Any]], dict[str, bytes], str | None]:
        async with Client(example_server.url, mode=mode) as c:
            extensions = c.server_capabilities.model_dump(by_alias=True).get("extensions") or {}
            (entry,) = (await list_skills(c)).skills
            files = {r["uri"]: verified(await read_bytes(c, r["uri"]), r) for r in entry["resources"]}
            return extensions, entry["resources"], files, c.instructions

    extensions, manifest, files, instructions = run(scenario())

    assert extensions["io.modelcontextprotocol/skills"] == {"directoryRead": True}
    assert [r["uri"] for r in manifest] == [
        "skill://bookshop-desk/SKILL.md", "skill://bookshop-desk/references/reservations.md"]
    runbook = files["skill://bookshop-desk/SKILL.md"].decode()
    for tool in ("search_books", "get_book", "reserve_book", "opening_hours"):  # a runbook for its own tools
        assert f"`{tool}`" in runbook
    assert instructions is not None and "skill://bookshop-desk/SKILL.md" in instructions
