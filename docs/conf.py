"""Sphinx configuration: the flask-mcp documentation site (MyST Markdown pages,
the Pallets theme Flask's own documentation uses).

    sphinx-build -W -b html docs docs/_build/html      # or: tox -e docs
"""

from __future__ import annotations

import sys
from importlib.metadata import version as installed_version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "flask-mcp"
copyright = "flask-mcp developers"  # noqa: A001 (Sphinx's name)
release = installed_version("flask-mcp")
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "pallets_sphinx_themes",
    "mcp_config_reference",  # _ext/: the configuration reference, generated from flask_mcp/config.py
    "guides_toctree",  # _ext/: every page not in the main toctree is a guide
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # README-style links to "#a-section" work across pages

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_preserve_defaults = True

html_theme = "flask"
html_title = f"flask-mcp {version}"
html_theme_options = {"index_sidebar_logo": False}
html_sidebars = {
    "index": ["project.html", "localtoc.html", "searchbox.html"],
    "**": ["localtoc.html", "relations.html", "searchbox.html"],
}
html_static_path: list[str] = []
