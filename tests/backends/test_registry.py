"""Backends are chosen by URI scheme from a registry; an installed
distribution adds a scheme through the ``flask_mcp.backends`` entry point
group; an object the app hands in must implement the store contract."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from flask_mcp import MCP
from flask_mcp.backends import ENTRY_POINT_GROUP, MemorySessionStore, SessionStore, open_backend
from flask_mcp.backends.registry import BUILT_IN, installed_schemes, opener_for
from flask_mcp.backends.sqlite import SqliteSessionStore
from flask_mcp.protocol.session import Session
from flask_mcp.testing import MCPTestClient

#: A backend package as a third party would ship it: its opener builds a
#: Backend from the contracts module only.
PACKAGE = '''
from flask_mcp.backends.contracts import Backend, BackendOptions
from flask_mcp.backends.memory import MemoryMessageBus, MemorySessionStore

opened = []


def open_uri(uri: str, options: BackendOptions) -> Backend:
    if "bad" in uri:
        raise ValueError(f"MCP_BACKEND {uri!r}: the demo backend refuses 'bad'.")
    opened.append((uri, options))
    return Backend(
        sessions=MemorySessionStore(timeout=options.timeout),
        bus=MemoryMessageBus(),
        description="demo " + uri.partition("://")[2],
    )


NOT_A_FUNCTION = 42
'''


@pytest.fixture
def demo_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed distribution ``flask-mcp-demo-backend`` (a package and its
    ``.dist-info`` in a site folder on ``sys.path``) registering three schemes:
    ``demo``, ``broken`` (not callable) and ``sqlite`` (a built-in, which it must not take)."""
    site = tmp_path / "site"
    (site / "flask_mcp_demo_backend").mkdir(parents=True)
    (site / "flask_mcp_demo_backend" / "__init__.py").write_text(PACKAGE)
    info = site / "flask_mcp_demo_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flask-mcp-demo-backend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            f"""\
            [{ENTRY_POINT_GROUP}]
            demo = flask_mcp_demo_backend:open_uri
            broken = flask_mcp_demo_backend:NOT_A_FUNCTION
            sqlite = flask_mcp_demo_backend:open_uri
            """
        )
    )
    (info / "RECORD").write_text("")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(__import__("sys").modules, "flask_mcp_demo_backend", raising=False)
    return site


def test_a_scheme_of_an_installed_distribution_opens_its_backend(demo_distribution: Path, tmp_path: Path) -> None:
    backend = open_backend("demo://shard-7", timeout=42, instance_path=str(tmp_path), io_timeout=1.5, retention=9)

    assert backend.describe() == "demo shard-7"
    assert isinstance(backend.sessions, MemorySessionStore)
    import flask_mcp_demo_backend  # type: ignore[import-not-found]

    ((uri, options),) = flask_mcp_demo_backend.opened
    assert uri == "demo://shard-7"
    assert (options.timeout, options.instance_path, options.io_timeout, options.retention) == (
        42,
        str(tmp_path),
        1.5,
        9,
    )


def test_an_app_serves_sessions_from_a_third_party_backend(demo_distribution: Path, tmp_path: Path) -> None:
    app = Flask(__name__, instance_path=str(tmp_path))
    app.config.update(TESTING=True, MCP_BACKEND="DEMO://app")
    mcp = MCP(app)

    @mcp.tool
    def echo(text: str) -> str:
        """Say it back."""
        return text

    state = app.extensions["mcp"]
    assert state.backend.describe() == "demo app"
    client = MCPTestClient(app, protocol_version="2025-11-25")
    client.initialize()
    assert client.call_tool("echo", {"text": "hi"}).result["content"][0]["text"] == "hi"
    assert len(state.backend.sessions._records) == 1


def test_an_installed_distribution_cannot_take_over_a_built_in_scheme(
    demo_distribution: Path, tmp_path: Path
) -> None:
    assert "demo" in installed_schemes()
    assert "sqlite" not in installed_schemes()
    backend = open_backend("sqlite://", timeout=42, instance_path=str(tmp_path))
    assert isinstance(backend.sessions, SqliteSessionStore)
    backend.close()


def test_an_entry_point_that_is_not_a_function_is_refused_with_its_name(demo_distribution: Path) -> None:
    with pytest.raises(TypeError, match="'broken' of 'flask_mcp_demo_backend:NOT_A_FUNCTION' is not callable"):
        opener_for("broken")


def test_an_openers_refusal_reaches_the_app_with_what_is_accepted(demo_distribution: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="refuses 'bad'.*MCP_BACKEND accepts") as caught:
        open_backend("demo://bad", timeout=42, instance_path=str(tmp_path))
    assert "entry point group 'flask_mcp.backends'" in str(caught.value)


def test_without_the_distribution_its_scheme_is_unknown(tmp_path: Path) -> None:
    assert "demo" not in installed_schemes()
    with pytest.raises(ValueError, match="unknown scheme 'demo'"):
        open_backend("demo://shard-7", timeout=42, instance_path=str(tmp_path))


def test_every_built_in_scheme_has_an_opener() -> None:
    for scheme in BUILT_IN:
        assert callable(opener_for(scheme))


class _OwnStore:
    """A store written by an app, inheriting nothing from the package."""

    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}

    def create(self, session: Session) -> None:
        self.sessions[session.id] = session

    def get(self, session_id: str) -> Session | None:
        return self.sessions.get(session_id)

    def save(self, session: Session) -> None:
        self.sessions[session.id] = session

    def touch(self, session_id: str) -> bool:
        return session_id in self.sessions

    def delete(self, session_id: str) -> bool:
        return self.sessions.pop(session_id, None) is not None


class _NoTouch:
    def create(self, session: Any) -> None: ...
    def get(self, session_id: str) -> Any: ...
    def save(self, session: Any) -> None: ...

    def delete(self, session_id: str) -> bool:
        return False


def test_an_apps_own_store_is_accepted_when_it_implements_the_contract(tmp_path: Path) -> None:
    store = _OwnStore()
    assert isinstance(store, SessionStore)
    backend = open_backend(store, timeout=42, instance_path=str(tmp_path))
    assert backend.sessions is store
    assert backend.bus is None
    assert backend.describe() == "custom store _OwnStore"


def test_an_object_missing_part_of_the_contract_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"flask_mcp.backends.SessionStore \(create, get, save, touch, delete\)"):
        open_backend(_NoTouch(), timeout=42, instance_path=str(tmp_path))
