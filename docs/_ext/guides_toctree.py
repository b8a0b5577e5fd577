"""A Guides table of contents that cannot miss a page: the index lists the
guides in the order a reader needs them, and ``%GUIDES%`` stands for every page
in docs/ that no toctree of the index names, so a new ``docs/<topic>.md``
appears in the site (where the placeholder stands) without an edit to the index.

In ``index.md``::

    ```{toctree}
    :caption: Guides
    tools
    context
    %GUIDES%
    backends
    ```
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tests/test_docs.py imports this module where Sphinx is not installed
    from sphinx.application import Sphinx

PLACEHOLDER = "%GUIDES%"


def _listed(text: str) -> set[str]:
    """Page names listed in the toctrees of the index (the placeholder's own included)."""
    names: set[str] = set()
    for block in re.findall(r"```\{toctree\}(.*?)```", text, re.DOTALL):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith(":") and line != PLACEHOLDER:
                names.add(re.sub(r"^.*<(.+)>$", r"\1", line))
    return names


def filled_in(index: str, pages: Iterable[str], root_doc: str = "index") -> str:
    """The index's text with the placeholder replaced by the top-level ``pages``
    that no toctree of it names, by name."""
    taken = _listed(index) | {root_doc}
    guides = sorted(name for name in pages if name not in taken and "/" not in name)
    return index.replace(PLACEHOLDER, "\n".join(guides))


def fill_in(app: Sphinx, docname: str, source: list[str]) -> None:
    if docname != app.config.root_doc or PLACEHOLDER not in source[0]:
        return
    source[0] = filled_in(source[0], app.env.found_docs, app.config.root_doc)


def reread_index(app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    """An incremental build re-reads the index whenever pages come or go, so a
    new page is listed without a clean build."""
    return [app.config.root_doc] if added or removed else []


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("source-read", fill_in)
    app.connect("env-get-outdated", reread_index)
    return {"parallel_read_safe": True}
