"""The skills extension (SEP-2640) over Flask's test client: capability
declaration per revision, ``skills/list`` and ``skills/get``, skill files
through ``resources/read`` (digests and sizes of the bytes served),
``resources/directory/read`` behind its setting, generated skills, and scopes.
Every message is validated against its revision's schema (conftest)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import connect
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.auth import Principal
from flask_mcp.features.skills.frontmatter import parse
from flask_mcp.testing import MCPResponse, MCPTestClient

MakeClient = Callable[..., MCPTestClient]
SKILLS = "io.modelcontextprotocol/skills"
ALL_VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
SKILL_VERSIONS = ["2026-07-28", "2025-11-25"]
FIXTURES = Path(__file__).resolve().parents[2] / "skill_fixtures"
RUNBOOK = "skill://ops/deploy-runbook/SKILL.md"

# The extension's types (specification/stable/skills.mdx), as JSON Schema.
SKILL_RESOURCE = {
    "type": "object",
    "required": ["uri", "digest", "size"],
    "properties": {
        "uri": {"type": "string"},
        "digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
        "size": {"type": "integer", "minimum": 0},
    },
}
SKILL = {
    "type": "object",
    "required": ["uri", "frontmatter", "resources"],
    "properties": {
        "uri": {"type": "string", "pattern": "/SKILL\\.md$"},
        "frontmatter": {
            "type": "object",
            "required": ["name", "description"],
            "properties": {"name": {"type": "string"}, "description": {"type": "string", "minLength": 1}},
        },
        "resources": {"oneOf": [{"const": "dynamic"}, {"type": "array", "items": SKILL_RESOURCE}]},
    },
}
LIST_RESULT = {"type": "object", "required": ["skills"], "properties": {"skills": {"type": "array", "items": SKILL}}}
GET_RESULT = {"type": "object", "required": ["skill"], "properties": {"skill": SKILL}}


def build_app(**config: Any) -> tuple[Flask, MCP]:
    app = Flask("skills")
    app.config.update({"MCP_BACKEND": "memory://", "TESTING": True, **config})
    mcp = MCP(app)
    return app, mcp


@pytest.fixture
def app() -> Flask:
    app, mcp = build_app(MCP_SKILLS_DIRECTORY_READ=True)
    mcp.skills_from_directory(FIXTURES)

    @mcp.skill(frontmatter={"license": "MIT", "metadata": {"cadence": "daily"}})
    def daily_report(ctx: Context) -> dict[str, str | bytes]:
        """Assemble today's report."""
        return {"SKILL.md": "# Today\n\nRead data/today.json.\n", "data/today.json": '{"orders": 3}',
                "data/chart.bin": b"\x00\x01\x02"}

    return app


def capabilities(client: MCPTestClient) -> dict[str, Any]:
    response = client.discover() if client.stateless else client.initialize()
    return response.result["capabilities"]  # type: ignore[no-any-return]


def raw_bytes(response: MCPResponse) -> bytes:
    (contents,) = response.result["contents"]
    return contents["text"].encode() if "text" in contents else base64.b64decode(contents["blob"])


def all_skills(client: MCPTestClient) -> list[dict[str, Any]]:
    skills, cursor = [], None
    while True:
        result = client.list_skills(cursor).result
        jsonschema.validate(result, LIST_RESULT)
        skills.extend(result["skills"])
        cursor = result.get("nextCursor")
        if cursor is None:
            return skills


# ---------------------------------------------------------------------- declaration


@pytest.mark.parametrize("version", SKILL_VERSIONS)
def test_the_extension_is_declared_with_resources_on_2026_and_2025_11_25(
    make_client: MakeClient, app: Flask, version: str
) -> None:
    caps = capabilities(make_client(app, version))

    assert caps["extensions"][SKILLS] == {"directoryRead": True}
    assert isinstance(caps["resources"], dict)  # the extension requires the resources capability


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_older_sessions_get_no_extension_but_read_skill_files_as_ordinary_resources(
    make_client: MakeClient, app: Flask, version: str
) -> None:
    client = make_client(app, version)
    caps = capabilities(client)

    assert SKILLS not in caps.get("extensions", {})
    assert client.list_skills().error["code"] == -32601
    assert raw_bytes(client.read_resource(RUNBOOK)).startswith(b"---\nname: deploy-runbook\n")


def test_without_skills_nothing_is_declared_and_the_methods_are_unknown(make_client: MakeClient) -> None:
    app, _ = build_app()
    client = make_client(app)

    assert "extensions" not in capabilities(client)
    response = client.list_skills()
    assert response.status_code == 404 and response.error["code"] == -32601
    assert "skills extension" in response.error["message"]


def test_directory_read_is_off_by_default_and_then_undeclared_and_unknown(make_client: MakeClient) -> None:
    app, mcp = build_app()
    mcp.skills_from_directory(FIXTURES)
    client = make_client(app)

    assert capabilities(client)["extensions"][SKILLS] == {}
    response = client.read_directory("skill://ops/deploy-runbook")
    assert response.error["code"] == -32601 and "directoryRead" in response.error["message"]


# ---------------------------------------------------------------------- listing and getting


@pytest.mark.parametrize("version", SKILL_VERSIONS)
def test_each_file_read_matches_its_manifest_digest_and_size(make_client: MakeClient, app: Flask, version: str) -> None:
    client = connect(make_client, app, version)
    (entry,) = [s for s in all_skills(client) if s["uri"] == RUNBOOK]

    for manifest in entry["resources"]:
        data = raw_bytes(client.read_resource(manifest["uri"]))
        assert len(data) == manifest["size"]
        assert manifest["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
    on_disk = (FIXTURES / "ops/deploy-runbook/assets/diagram.png").read_bytes()
    assert raw_bytes(client.read_resource("skill://ops/deploy-runbook/assets/diagram.png")) == on_disk


@pytest.mark.parametrize("version", SKILL_VERSIONS)
def test_the_listing_carries_front_matter_verbatim_and_cache_hints_only_on_2026(
    make_client: MakeClient, app: Flask, version: str
) -> None:
    client = connect(make_client, app, version)
    result = client.list_skills().result
    entries = {s["uri"]: s for s in result["skills"]}

    runbook = entries[RUNBOOK]
    assert runbook["frontmatter"] == parse((FIXTURES / "ops/deploy-runbook/SKILL.md").read_text(), "SKILL.md")
    assert runbook["frontmatter"]["metadata"]["reviewed"] == "2026-11-02"  # YAML 1.2: a date stays a string
    assert entries["skill://daily-report/SKILL.md"]["resources"] == "dynamic"
    assert list(entries) == [RUNBOOK, "skill://payroll-guide/SKILL.md", "skill://daily-report/SKILL.md"]
    if version == "2026-07-28":
        assert result["ttlMs"] == 60_000 and result["cacheScope"] == "public"
    else:
        assert "ttlMs" not in result and "cacheScope" not in result


def test_listing_pages_never_split_an_entry_and_cursors_round_trip(make_client: MakeClient) -> None:
    app, mcp = build_app(MCP_PAGE_SIZE=1)
    mcp.skills_from_directory(FIXTURES)
    client = make_client(app)

    first = client.list_skills().result
    second = client.list_skills(first["nextCursor"]).result

    assert len(first["skills"]) == 1 and len(first["skills"][0]["resources"]) == 3
    assert [s["uri"] for s in second["skills"]] == ["skill://payroll-guide/SKILL.md"]
    assert "nextCursor" not in second
    assert client.list_skills("not-a-cursor").error["code"] == -32602


@pytest.mark.parametrize("version", SKILL_VERSIONS)
def test_get_returns_the_listed_entry_and_unknown_uris_are_invalid_params(
    make_client: MakeClient, app: Flask, version: str
) -> None:
    client = connect(make_client, app, version)
    listed = {s["uri"]: s for s in client.list_skills().result["skills"]}

    got = client.get_skill(RUNBOOK).result
    jsonschema.validate(got, GET_RESULT)
    assert got["skill"] == listed[RUNBOOK]
    assert "nextCursor" not in got
    assert ("ttlMs" in got) == (version == "2026-07-28")
    for uri in ("skill://nowhere/SKILL.md", "skill://ops/deploy-runbook/references/rollback.md",
                "skill://ops/deploy-runbook"):
        error = client.get_skill(uri).error
        assert error["code"] == -32602 and error["data"] == {"uri": uri}
    assert client.request("skills/get", {}).error["code"] == -32602


def test_resources_list_shows_each_skill_md_named_and_described_by_its_front_matter(
    make_client: MakeClient, app: Flask
) -> None:
    listed = {r["uri"]: r for r in make_client(app).list_resources().result["resources"]}

    assert listed[RUNBOOK] == {
        "uri": RUNBOOK, "name": "deploy-runbook", "mimeType": "text/markdown",
        "description": "Deploy the service and roll it back when the health check fails",
        "size": (FIXTURES / "ops/deploy-runbook/SKILL.md").stat().st_size,
    }
    assert "skill://ops/deploy-runbook/references/rollback.md" not in listed  # in the manifest, not the list


# ---------------------------------------------------------------------- directories


def test_directory_read_lists_direct_children_with_subdirectories_as_directories(
    make_client: MakeClient, app: Flask
) -> None:
    client = make_client(app)

    root = client.read_directory("skill://ops/deploy-runbook").result["resources"]
    assets = client.read_directory("skill://ops/deploy-runbook/assets").result["resources"]

    assert root == [
        {"uri": RUNBOOK, "name": "SKILL.md", "mimeType": "text/markdown",
         "size": (FIXTURES / "ops/deploy-runbook/SKILL.md").stat().st_size},
        {"uri": "skill://ops/deploy-runbook/assets", "name": "assets", "mimeType": "inode/directory"},
        {"uri": "skill://ops/deploy-runbook/references", "name": "references", "mimeType": "inode/directory"},
    ]
    assert [(c["name"], c["mimeType"]) for c in assets] == [("diagram.png", "image/png")]


def test_directory_read_of_a_file_or_an_unknown_uri_is_invalid_params(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app)

    for uri in (RUNBOOK, "skill://ops", "skill://ops/deploy-runbook/missing", "skill://ops/deploy-runbook/"):
        error = client.read_directory(uri).error
        assert error["code"] == -32602 and error["data"] == {"uri": uri}


def test_directory_read_pages_with_cursors(make_client: MakeClient) -> None:
    app, mcp = build_app(MCP_SKILLS_DIRECTORY_READ=True, MCP_PAGE_SIZE=2)
    mcp.skills_from_directory(FIXTURES)
    client = make_client(app)

    first = client.read_directory("skill://ops/deploy-runbook").result
    rest = client.read_directory("skill://ops/deploy-runbook", first["nextCursor"]).result

    assert [c["name"] for c in first["resources"] + rest["resources"]] == ["SKILL.md", "assets", "references"]
    assert "nextCursor" not in rest


# ---------------------------------------------------------------------- generated skills


def test_a_generated_skill_md_carries_its_front_matter_and_its_files_are_read_and_listed(
    make_client: MakeClient, app: Flask
) -> None:
    client = make_client(app)

    entry = client.get_skill("skill://daily-report/SKILL.md").result["skill"]
    text = raw_bytes(client.read_resource("skill://daily-report/SKILL.md")).decode()
    data = client.read_directory("skill://daily-report/data").result["resources"]

    assert entry == {
        "uri": "skill://daily-report/SKILL.md",
        "frontmatter": {"name": "daily-report", "description": "Assemble today's report.", "license": "MIT",
                        "metadata": {"cadence": "daily"}},
        "resources": "dynamic",
    }
    assert parse(text, "generated SKILL.md") == entry["frontmatter"]
    assert text.endswith("# Today\n\nRead data/today.json.\n")
    assert [c["name"] for c in data] == ["chart.bin", "today.json"]
    assert raw_bytes(client.read_resource("skill://daily-report/data/chart.bin")) == b"\x00\x01\x02"
    assert client.read_resource("skill://daily-report/data/missing.json").error["code"] == -32602


def test_a_generated_skill_that_fails_or_returns_a_bad_path_is_an_internal_error_without_details(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    app, mcp = build_app()

    @mcp.skill(description="Breaks")
    def broken() -> str:
        raise RuntimeError("database password is hunter2")

    @mcp.skill(description="Escapes")
    def escaping() -> dict[str, str]:
        return {"SKILL.md": "hi", "../../etc/passwd": "root"}

    client = make_client(app)
    for uri in ("skill://broken/SKILL.md", "skill://escaping/SKILL.md"):
        response = client.read_resource(uri)
        assert response.status_code == 200 and response.error["code"] == -32603
        assert "hunter2" not in response.error["message"] and "passwd" not in response.error["message"]
    assert "hunter2" in caplog.text  # the operator gets the details


# ---------------------------------------------------------------------- paths


@pytest.mark.parametrize("uri", [
    "skill://ops/deploy-runbook/../payroll-guide/SKILL.md",
    "skill://ops/deploy-runbook/%2e%2e/%2e%2e/etc/passwd",
    "skill://ops/deploy-runbook/references/../SKILL.md",
    "skill://ops/deploy-runbook//SKILL.md",
    "skill://ops/deploy-runbook/references%2Frollback.md",
    "skill://ops/deploy-runbook/.hidden",
])
def test_only_the_exact_uris_of_served_files_are_readable(make_client: MakeClient, app: Flask, uri: str) -> None:
    response = make_client(app).read_resource(uri)

    assert response.error["code"] == -32602 and response.error["data"] == {"uri": uri}


def test_nested_skills_are_listed_flat_and_the_enclosing_manifest_lists_their_files(
    make_client: MakeClient, tmp_path: Path
) -> None:
    write(tmp_path / "outer/SKILL.md", skill_md("outer"))
    write(tmp_path / "outer/inner/SKILL.md", skill_md("inner"))
    write(tmp_path / "outer/inner/notes.md", "notes")
    app, mcp = build_app()
    uris = mcp.skills_from_directory(tmp_path, prefix="acme")
    client = make_client(app)

    entries = {s["uri"]: s for s in client.list_skills().result["skills"]}

    assert uris == ["skill://acme/outer/SKILL.md", "skill://acme/outer/inner/SKILL.md"]
    assert [r["uri"] for r in entries[uris[0]]["resources"]] == [
        uris[0], "skill://acme/outer/inner/SKILL.md", "skill://acme/outer/inner/notes.md"]
    assert [r["uri"] for r in entries[uris[1]]["resources"]] == [uris[1], "skill://acme/outer/inner/notes.md"]


def test_file_names_that_need_escaping_are_percent_encoded_in_their_uris(
    make_client: MakeClient, tmp_path: Path
) -> None:
    write(tmp_path / "notes/SKILL.md", skill_md("notes"))
    write(tmp_path / "notes/meeting notes #1.md", "agenda")
    app, mcp = build_app()
    mcp.skills_from_directory(tmp_path)
    client = make_client(app)

    (entry,) = client.list_skills().result["skills"]

    assert entry["resources"][1]["uri"] == "skill://notes/meeting%20notes%20%231.md"
    assert raw_bytes(client.read_resource("skill://notes/meeting%20notes%20%231.md")) == b"agenda"


def test_removing_a_skill_stops_serving_it(make_client: MakeClient, app: Flask) -> None:
    mcp: MCP = app.extensions["mcp"].extension
    mcp.remove_skill(RUNBOOK)
    client = make_client(app)

    assert RUNBOOK not in {s["uri"] for s in client.list_skills().result["skills"]}
    assert client.read_resource(RUNBOOK).error["code"] == -32602
    with pytest.raises(KeyError):
        mcp.remove_skill(RUNBOOK)


# ---------------------------------------------------------------------- scopes

TOKENS = {
    "plain-token": Principal(subject="plain", scopes=frozenset()),
    "payroll-token": Principal(subject="clerk", scopes=frozenset({"payroll:read"})),
}


@pytest.fixture
def scoped_app() -> Flask:
    app, mcp = build_app(MCP_AUTH=True, MCP_AUTH_SERVERS=["https://auth.example.com"],
                         MCP_SKILLS_DIRECTORY_READ=True)
    mcp.token_verifier(TOKENS.get)
    mcp.skills_from_directory(FIXTURES, scopes={"payroll-guide": ["payroll:read"]})
    return app


@pytest.mark.parametrize("version", SKILL_VERSIONS)
def test_a_scoped_skill_is_hidden_from_callers_without_its_scope_and_refused_with_403(
    make_client: MakeClient, scoped_app: Flask, version: str
) -> None:
    plain = connect(make_client, scoped_app, version, headers={"Authorization": "Bearer plain-token"})
    clerk = connect(make_client, scoped_app, version, headers={"Authorization": "Bearer payroll-token"})
    payroll = "skill://payroll-guide/SKILL.md"

    assert payroll not in {s["uri"] for s in plain.list_skills().result["skills"]}
    assert payroll not in {r["uri"] for r in plain.list_resources().result["resources"]}
    for response in (plain.get_skill(payroll), plain.read_resource(payroll)):
        assert response.status_code == 403 and "payroll:read" in response.error["message"]
        assert 'error="insufficient_scope"' in response.headers["WWW-Authenticate"]
    assert plain.read_directory("skill://payroll-guide").error["code"] == -32602
    assert payroll in {s["uri"] for s in clerk.list_skills().result["skills"]}
    assert raw_bytes(clerk.read_resource(payroll)).startswith(b"---\nname: payroll-guide")
    if version == "2026-07-28":
        assert clerk.list_skills().result["cacheScope"] == "private"
        assert clerk.get_skill(payroll).result["cacheScope"] == "private"


def test_skill_scopes_appear_in_the_protected_resource_metadata(scoped_app: Flask) -> None:
    document = scoped_app.test_client().get("/.well-known/oauth-protected-resource/mcp").get_json()

    assert "payroll:read" in document["scopes_supported"]


# ---------------------------------------------------------------------- helpers


def skill_md(name: str, description: str = "Does things") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_misspelt_skill_option_fails_at_decoration_naming_the_options() -> None:
    mcp = MCP(name="skills", version="1")
    with pytest.raises(TypeError, match="'descripton'.*it takes.*description"):
        mcp.skill("runbook", descripton="typo")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'scope'"):
        mcp.add_skill(lambda: "# Body", name="runbook", scope=["x"])  # type: ignore[call-arg]
