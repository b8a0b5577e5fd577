"""A Guides table of contents that lists itself: every page in docs/ that the
index does not list elsewhere, so a new ``docs/<topic>.md`` appears in the
site without an edit to the index.

In ``index.md``::

    ```{toctree}
    :caption: Guides
    :glob:
    %GUIDES%
    ```
"""

from __future__ import annotations

import re
from typing import Any

from sphinx.application import Sphinx

PLACEHOLDER = "%GUIDES%"


def _listed(text: str) -> set[str]:
    """Page names listed in the other toctrees of the index."""
    names: set[str] = set()
    for block in re.findall(r"```\{toctree\}(.*?)```", text, re.DOTALL):
        if PLACEHOLDER in block:
            continue
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith(":"):
                names.add(re.sub(r"^.*<(.+)>$", r"\1", line))
    return names


def fill_in(app: Sphinx, docname: str, source: list[str]) -> None:
    if docname != app.config.root_doc or PLACEHOLDER not in source[0]:
        return
    taken = _listed(source[0]) | {app.config.root_doc}
    guides = sorted(name for name in app.env.found_docs if name not in taken and "/" not in name)
    source[0] = source[0].replace(PLACEHOLDER, "\n".join(guides))


def reread_index(app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    """An incremental build re-reads the index whenever pages come or go, so a
    new page is listed without a clean build."""
    return [app.config.root_doc] if added or removed else []


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("source-read", fill_in)
    app.connect("env-get-outdated", reread_index)
    return {"parallel_read_safe": True}
