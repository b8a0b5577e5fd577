"""Documentation is code: every ```python block of README.md and docs/*.md runs.

How a block runs is chosen by the line right before its opening fence:

- (no marker): the block is a complete program. It is written to ``block.py``
  in an empty temporary folder and run there by a fresh interpreter
  (``python block.py``), which must exit 0 within two minutes. It may import
  flask_mcp and the test extras; no FLASK_MCP_* variable is set.
- ``<!-- pytest -->``: the block is a complete pytest module (it defines its
  own app and fixtures). It is written to ``test_block.py`` in an empty folder
  and run with ``python -m pytest``, which must pass at least one test.
- ``<!-- fragment -->``: not run. For a piece that cannot stand alone on
  purpose (e.g. it needs a database the page only describes); use sparingly.
- ``<!-- file: notes/models.py -->``: one file of a project laid out over
  several modules (an application factory). Every later block of the same
  page runs in a folder holding the page's files so far, so it imports them
  (``from notes import create_app``); a page's last file must be followed by
  a block that runs.

Any other ``<!-- ... -->`` line before a fence is an error, so a typo in a
marker does not silently skip a block. ```bash, ```json etc. are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKERS = {"<!-- fragment -->": "fragment", "<!-- pytest -->": "pytest"}
FILE_MARKER = re.compile(r"^<!-- file: ([\w./-]+\.py) -->$")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    mode: str  # "program", "pytest", "fragment" or "file"
    code: str
    filename: str | None = None  # where a "file" block goes

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page: Path) -> list[Block]:
    """Every fenced block of a Markdown page, with the marker before it."""
    lines = page.read_text().splitlines()
    found = []
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index].strip())
        if not match:
            index += 1
            continue
        fence, language = match.groups()
        start = index
        body = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence):
            body.append(lines[index])
            index += 1
        index += 1
        before = lines[start - 1].strip() if start else ""
        file = FILE_MARKER.match(before)
        if before.startswith("<!--") and before not in MARKERS and not file:
            raise ValueError(f"{page.name}:{start + 1}: unknown marker {before!r} "
                             f"(known: {', '.join(MARKERS)}, <!-- file: path.py -->)")
        mode = "file" if file else MARKERS.get(before, "program")
        found.append(Block(page, start + 1, language.lower(), mode, "\n".join(body) + "\n",
                           file.group(1) if file else None))
    return found


PYTHON_BLOCKS = [b for page in PAGES for b in blocks_of(page) if b.language in ("python", "py")]


def clean_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("FLASK_MCP_") and k != "PYTHONPATH"}


@pytest.mark.parametrize("block", [b for b in PYTHON_BLOCKS if b.mode not in ("fragment", "file")],
                         ids=lambda b: b.where)
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    for earlier in PYTHON_BLOCKS:  # the page's files so far, for the block to import
        if earlier.page == block.page and earlier.line < block.line and earlier.filename is not None:
            (tmp_path / earlier.filename).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / earlier.filename).write_text(earlier.code)
    if block.mode == "pytest":
        (tmp_path / "test_block.py").write_text(block.code)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_block.py"]
    else:
        (tmp_path / "block.py").write_text(block.code)
        command = [sys.executable, "block.py"]
    done = subprocess.run(command, cwd=tmp_path, env=clean_environment(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"{block.where} ({block.mode}) failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    if block.mode == "pytest":
        assert re.search(r"\b[1-9]\d* passed\b", done.stdout), done.stdout


def test_the_pages_have_runnable_python_and_few_fragments() -> None:
    readme = [b for b in PYTHON_BLOCKS if b.page.name == "README.md"]
    assert any(b.mode != "fragment" for b in readme), "the README's first server must run as written"
    runnable = [b for b in PYTHON_BLOCKS if b.mode != "fragment"]
    assert len(runnable) >= 20, [b.where for b in PYTHON_BLOCKS]
    # Fragments are the exception: most of the documentation's Python must run as written.
    fragments = [b.where for b in PYTHON_BLOCKS if b.mode == "fragment"]
    assert len(fragments) <= len(runnable) // 3, fragments


def test_every_file_block_is_followed_by_a_block_that_runs() -> None:
    for page in PAGES:
        blocks = [b for b in PYTHON_BLOCKS if b.page == page]
        files = [b for b in blocks if b.mode == "file"]
        if files:
            assert any(b.mode in ("program", "pytest") and b.line > files[-1].line for b in blocks), files[-1].where


def test_markers_are_recognised(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n<!-- fragment -->\n```python\nx\n```\n<!-- pytest -->\n```python\ny\n```\n```python\nz\n```\n"
    )
    assert [(b.mode, b.code, b.line) for b in blocks_of(page)] == [
        ("fragment", "x\n", 3), ("pytest", "y\n", 7), ("program", "z\n", 10)
    ]
    page.write_text("<!-- file: pkg/mod.py -->\n```python\nx = 1\n```\n")
    assert [(b.mode, b.filename) for b in blocks_of(page)] == [("file", "pkg/mod.py")]
    page.write_text("<!-- fragmnet -->\n```python\nx\n```\n")
    with pytest.raises(ValueError, match="unknown marker"):
        blocks_of(page)
