"""``flask mcp ...``: the extension's commands in Flask's own command line.

``init_app`` adds the group to each app it initialises, so ``flask --app
yourapp mcp --help`` lists them for any app using flask-mcp (and for no
other). This package is the only part of flask-mcp that imports click.
"""

from __future__ import annotations

import click
from flask import Flask

from .calling import call_command
from .checking import check_command
from .listing import list_command
from .preview import preview_command
from .sessions import sessions_command

#: The group's name: ``flask mcp``.
GROUP_NAME = "mcp"


def create_group() -> click.Group:
    """A new ``mcp`` group (one per app: nothing is shared between apps)."""
    group = click.Group(GROUP_NAME, help="Inspect, call and check this app's MCP server.")
    for command in (list_command, call_command, check_command, sessions_command, preview_command):
        group.add_command(command)
    return group


def register(app: Flask) -> None:
    """Add ``flask mcp`` to the app's command line, unless the app already
    has an ``mcp`` command of its own (which is left alone)."""
    if GROUP_NAME not in app.cli.commands:
        app.cli.add_command(create_group())
