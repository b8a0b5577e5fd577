"""FLASK_MCP_* variables the app never loaded are named in a warning at
init_app (flask-mcp reads only app.config, as Flask does), and only then."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from flask import Flask

from flask_mcp import MCP


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("FLASK_MCP_"):
            monkeypatch.delenv(name)


def make_app(tmp_path: Path, *, load_env: bool) -> Flask:
    app = Flask(__name__, instance_path=str(tmp_path))
    if load_env:
        app.config.from_prefixed_env()
    MCP(app)
    return app


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "flask_mcp" and r.levelno == logging.WARNING]


def test_unloaded_variables_are_named_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FLASK_MCP_BACKEND", "memory://")
    monkeypatch.setenv("FLASK_MCP_PAGE_SIZE", "7")
    monkeypatch.setenv("FLASK_SECRET_KEY", "not an MCP setting")
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        app = make_app(tmp_path, load_env=False)
    [message] = warnings_of(caplog)
    assert message.startswith("FLASK_MCP_BACKEND, FLASK_MCP_PAGE_SIZE are set in the environment")
    assert "app.config.from_prefixed_env()" in message and "FLASK_SECRET_KEY" not in message
    # ... and the warning tells the truth: they were ignored.
    settings = app.extensions["mcp"].settings
    assert settings.page_size == 100 and settings.backend == "sqlite://"


def test_loaded_variables_apply_without_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FLASK_MCP_PAGE_SIZE", "7")
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        app = make_app(tmp_path, load_env=True)
    assert warnings_of(caplog) == []
    assert app.extensions["mcp"].settings.page_size == 7


def test_a_key_the_app_set_itself_is_its_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FLASK_MCP_PAGE_SIZE", "7")
    app = Flask(__name__, instance_path=str(tmp_path))
    app.config["MCP_PAGE_SIZE"] = 5
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        MCP(app)
    assert warnings_of(caplog) == []
    assert app.extensions["mcp"].settings.page_size == 5


def test_nested_variables_are_checked_by_their_top_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FLASK_MCP_ALLOWED_HOSTS__0", "mcp.example.com")
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        make_app(tmp_path, load_env=False)
    [message] = warnings_of(caplog)
    assert message.startswith("FLASK_MCP_ALLOWED_HOSTS__0 is set in the environment") and "ignores it" in message


def test_no_variables_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="flask_mcp"):
        make_app(tmp_path, load_env=False)
    assert warnings_of(caplog) == []
