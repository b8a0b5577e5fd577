"""``flask mcp ...``: the extension's commands in Flask's own command line.

``init_app`` adds the group to each app it initialises, so ``flask --app
yourapp mcp --help`` lists them for any app using flask-mcp (and for no
other). This package is the only part of flask-mcp that imports click. The
commands' modules are imported when a command runs, not when the group is
added: a gunicorn worker that never runs one does not pay for them.

May import every part of flask_mcp but the extension, which adds the group.
"""

from __future__ import annotations

import importlib

import click
from flask import Flask

#: The group's name: ``flask mcp``.
GROUP_NAME = "mcp"
#: Each command's module and attribute.
COMMANDS = {
    "call": ("calling", "call_command"),
    "check": ("checking", "check_command"),
    "list": ("listing", "list_command"),
    "preview": ("preview", "preview_command"),
    "sessions": ("sessions", "sessions_command"),
    "stdio": ("stdio", "stdio_command"),
}


class MCPGroup(click.Group):
    """The ``mcp`` group, importing each command's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        command: click.Command = getattr(importlib.import_module(f".{where[0]}", __name__), where[1])
        return command


def create_group() -> click.Group:
    """A new ``mcp`` group (one per app: nothing is shared between apps)."""
    return MCPGroup(GROUP_NAME, help="Inspect, call and check this app's MCP server, or serve it on stdio.")


def register(app: Flask) -> None:
    """Add ``flask mcp`` to the app's command line, unless the app already
    has an ``mcp`` command of its own (which is left alone)."""
    if GROUP_NAME not in app.cli.commands:
        app.cli.add_command(create_group())
