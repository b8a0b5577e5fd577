"""The ``mcp-config`` directive: the configuration reference, generated at
build time from ``flask_mcp/config.py`` -- the keys and defaults from one of
its tables (``DEFAULTS``, or the table named as the directive's argument, e.g.
``OAUTH_DEFAULTS``), each key's description from the comment on its line. A key without a
description is a build warning (and ``-W`` makes it an error), so the page
cannot fall behind the code.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

_KEY = re.compile(r'^\s*"(?P<key>MCP_\w+)":\s*(?P<value>.*?),?\s*(?:#\s*(?P<comment>.*))?$')


#: The tables of flask_mcp/config.py a page may show.
TABLES = ("DEFAULTS", "OAUTH_DEFAULTS")


def read_config_source(table: str = "DEFAULTS") -> tuple[dict[str, Any], dict[str, str]]:
    """The table, and each key's description (the comment on its line), in source order."""
    from flask_mcp import config

    lines, _ = inspect.getsourcelines(config)
    start = next(i for i, line in enumerate(lines) if line.startswith((f"{table}:", f"{table} =")))
    described: dict[str, str] = {}
    for line in lines[start + 1:]:
        if line.startswith("}"):
            break
        if key := _KEY.match(line):
            described[key["key"]] = key["comment"] or ""
    return getattr(config, table), described


def _default(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, tuple):
        return repr(list(value)) if value else "()"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1024 * 1024 and value % (1024 * 1024) == 0:
        return f"{value} ({value // (1024 * 1024)} MiB)"
    return repr(value)


def _row(*cells: nodes.Node) -> nodes.row:
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        entry += cell
        row += entry
    return row


class ConfigReference(SphinxDirective):
    """Every ``MCP_*`` key of a table: its default and what it does, in the order of the source."""

    has_content = False
    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        table_name = self.arguments[0] if self.arguments else "DEFAULTS"
        if table_name not in TABLES:
            raise self.error(f"mcp-config shows one of {', '.join(TABLES)}, not {table_name!r}")
        defaults, described = read_config_source(table_name)
        table = nodes.table(classes=["mcp-config"])
        tgroup = nodes.tgroup(cols=3)
        table += tgroup
        for width in (30, 20, 50):
            tgroup += nodes.colspec(colwidth=width)
        head = nodes.thead()
        head += _row(nodes.paragraph(text="key"), nodes.paragraph(text="default"), nodes.paragraph(text="description"))
        tgroup += head
        body = nodes.tbody()
        tgroup += body
        for key, value in defaults.items():
            description = described.get(key)
            if description is None:
                logger.warning("%s is in %s but not on a line of its own in flask_mcp/config.py", key, table_name,
                               location=self.get_location())
            elif not description:
                logger.warning("%s has no description: add a comment on its line in flask_mcp/config.py", key,
                               location=self.get_location())
            name = nodes.paragraph()
            name += nodes.target("", "", ids=[nodes.make_id(key)], names=[key.lower()])
            name += nodes.literal(text=key)
            body += _row(name, nodes.paragraph("", "", nodes.literal(text=_default(value))),
                         nodes.paragraph(text=description or ""))
        return [table]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("mcp-config", ConfigReference)
    return {"parallel_read_safe": True}
