"""The suite's shared set-up (``conftest.py``): no test writes into the checkout."""

from __future__ import annotations

from pathlib import Path

from flask import Flask

from flask_mcp import MCP

ROOT = Path(__file__).resolve().parents[1]


def test_the_app_fixture_keeps_its_instance_folder_outside_the_checkout(app: Flask, instance_folder: Path) -> None:
    assert app.testing
    assert Path(app.instance_path) == instance_folder
    assert not instance_folder.is_relative_to(ROOT)


def test_an_app_a_test_builds_stores_its_default_sessions_in_the_temporary_folder(instance_folder: Path) -> None:
    app = Flask("built_here")  # no instance_path: Flask would pick <cwd>/instance
    mcp = MCP(app)
    assert Path(app.instance_path) == instance_folder
    assert app.extensions["mcp"].backend.describe() == f"sqlite:///{instance_folder / 'flask-mcp.sqlite3'}"
    assert mcp.tools is not None
