"""Documentation is code: every ```python block of README.md, README.pypi.md
(the package index's long description) and docs/*.md runs.

How a block runs is chosen by the line right before its opening fence:

- (no marker): the block is a complete program. It is written to ``block.py``
  in an empty temporary folder and run there by a fresh interpreter
  (``python block.py``), which must exit 0 within two minutes. It may import
  flask_mcp and the test extras; no FLASK_MCP_* variable is set.
- ``<!-- pytest -->``: the block is a complete pytest module (it defines its
  own app and fixtures). It is written to ``test_block.py`` in an empty folder
  and run with ``python -m pytest``, which must pass at least one test.
- ``<!-- file: path/name.py -->``: a file of a project the page builds up
  (``extensions.py``, ``readinglist/tools.py``...). It is not run itself: it
  is written to that path, relative to the folder, for every block that runs
  after it on the same page (a later file block of the same path replaces it).
  Every file block must be followed by a block that runs.
- ``<!-- live: MODULE -->``: a program that calls a real server. The page's
  files are written, ``flask --app MODULE run`` serves them on a free loopback
  port, and the block runs once ``/mcp/health`` answers; the block names the
  server the way a reader's ``flask run`` listens, ``127.0.0.1:5000``, which
  is replaced by that port (and must be there).
- ``<!-- redis -->``: a program that needs the Redis the tests share
  (``conftest.REDIS_URL``); it gets its URL as ``FLASK_REDIS_URL`` (so
  ``app.config.from_prefixed_env()`` reads it as ``REDIS_URL``). Redis
  unreachable is a skip, and a failure in CI. Such a block removes what it
  wrote.
- ``<!-- fragment -->``: not run. For a piece that cannot stand alone on
  purpose (e.g. it needs a database the page only describes); use sparingly.
- ``<!-- file: notes/models.py -->``: one file of a project laid out over
  several modules (an application factory). Every later block of the same
  page runs in a folder holding the page's files so far, so it imports them
  (``from notes import create_app``); a page's last file must be followed by
  a block that runs.

Every runnable block gets the files of the file blocks before it on its page.
Any other ``<!-- ... -->`` line before a fence is an error, so a typo in a
marker does not silently skip a block. ```bash, ```json etc. are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType

import pytest
from conftest import REDIS_URL, ROOT, free_port, load_file, shared_redis, wait_for_health

PAGES = [ROOT / "README.md", ROOT / "README.pypi.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Each marker's mode, and whether it takes an argument (``<!-- file: app.py -->``).
MARKERS = {"fragment": False, "pytest": False, "file": True, "live": True, "redis": False}
RUNNABLE = ("program", "pytest", "live", "redis")
MARKER = re.compile(r"^<!--\s*(\w+)\s*(?::\s*(\S+)\s*)?-->$")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([\w+-]*)")
#: What a live block names its server by: where ``flask run`` listens.
DEV_SERVER = "127.0.0.1:5000"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    mode: str  # "program", "pytest", "file", "live", "redis" or "fragment"
    code: str
    argument: str = ""  # the path of a file block, the app of a live one

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


def parse_marker(line: str, where: str) -> tuple[str, str]:
    """The mode and argument a marker line names; a malformed one is an error."""
    match = MARKER.match(line)
    known = ", ".join(f"<!-- {m}: ... -->" if takes else f"<!-- {m} -->" for m, takes in MARKERS.items())
    if match is None or match.group(1) not in MARKERS:
        raise ValueError(f"{where}: unknown marker {line!r} (known: {known})")
    mode, argument = match.group(1), match.group(2) or ""
    if MARKERS[mode] != bool(argument):
        raise ValueError(f"{where}: {line!r}: <!-- {mode} --> {'needs' if MARKERS[mode] else 'takes no'} argument")
    if mode == "file":
        path = PurePosixPath(argument)
        if path.is_absolute() or ".." in path.parts:
            raise ValueError(f"{where}: {line!r}: a file block's path is relative to the block's folder")
    return mode, argument


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
        mode, argument = ("program", "")
        if before.startswith("<!--"):
            mode, argument = parse_marker(before, f"{page.name}:{start + 1}")
        found.append(Block(page, start + 1, language.lower(), mode, "\n".join(body) + "\n", argument))
    return found


def python_blocks(pages: list[Path]) -> list[Block]:
    return [b for page in pages for b in blocks_of(page) if b.language in ("python", "py")]


PYTHON_BLOCKS = python_blocks(PAGES)


def files_before(block: Block, blocks: list[Block]) -> dict[str, str]:
    """The project files a runnable block sees: the file blocks before it on its page."""
    files: dict[str, str] = {}
    for other in blocks:
        if other.page == block.page and other.line < block.line and other.mode == "file":
            files[other.argument] = other.code
    return files


def clean_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("FLASK_MCP_") and k != "PYTHONPATH"}


def run_block(block: Block, blocks: list[Block], folder: Path) -> subprocess.CompletedProcess[str]:
    """Run one block as its marker says, in ``folder`` (with the page's files before it)."""
    assert block.mode in RUNNABLE, block
    folder.mkdir(parents=True, exist_ok=True)
    for name, code in files_before(block, blocks).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(code)
    env = clean_environment()
    code = block.code
    if block.mode == "pytest":
        (folder / "test_block.py").write_text(code)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_block.py"]
    else:
        command = [sys.executable, "block.py"]
    if block.mode == "redis":
        shared_redis().close()  # reachable, or the test skips (fails in CI)
        env["FLASK_REDIS_URL"] = REDIS_URL
    if block.mode != "live":
        if block.mode != "pytest":
            (folder / "block.py").write_text(code)
        return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert DEV_SERVER in code, f"{block.where}: a live block calls the server at {DEV_SERVER}, where flask run listens"
    port = free_port()
    (folder / "block.py").write_text(code.replace(DEV_SERVER, f"127.0.0.1:{port}"))
    log = folder / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen([sys.executable, "-m", "flask", "--app", block.argument, "run", "--port", str(port)],
                                  cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_health(server, port, log, within=60)
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    if done.returncode != 0:
        done.stderr += f"\n--- the server's log ---\n{log.read_text()[-4000:]}"
    return done


@pytest.mark.parametrize("block", [b for b in PYTHON_BLOCKS if b.mode in RUNNABLE], ids=lambda b: b.where)
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    done = run_block(block, PYTHON_BLOCKS, tmp_path)
    assert done.returncode == 0, f"{block.where} ({block.mode}) failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    if block.mode == "pytest":
        assert re.search(r"\b[1-9]\d* passed\b", done.stdout), done.stdout


def test_every_file_block_is_used_by_a_block_that_runs_after_it() -> None:
    unused = [f.where for f in PYTHON_BLOCKS if f.mode == "file"
              and not any(b.page == f.page and b.line > f.line and b.mode in RUNNABLE for b in PYTHON_BLOCKS)]
    assert unused == []


def test_the_pages_have_runnable_python_and_few_fragments() -> None:
    readme = [b for b in PYTHON_BLOCKS if b.page.name == "README.md"]
    assert readme and readme[0].mode in (*RUNNABLE, "file"), "the README's first server must run as written"
    runnable = [b for b in PYTHON_BLOCKS if b.mode != "fragment"]
    assert len(runnable) >= 20, [b.where for b in PYTHON_BLOCKS]
    # Fragments are the exception: most of the documentation's Python must run as written.
    fragments = [b.where for b in PYTHON_BLOCKS if b.mode == "fragment"]
    assert len(fragments) <= len(runnable) // 3, fragments


def test_markers_are_recognised(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n<!-- fragment -->\n```python\nx\n```\n<!-- pytest -->\n```python\ny\n```\n```python\nz\n```\n"
        "<!-- file: pkg/app.py -->\n```python\nf\n```\n<!-- live: pkg.app -->\n```python\nl\n```\n"
        "<!-- redis -->\n```python\nr\n```\n"
    )
    assert [(b.mode, b.argument, b.code, b.line) for b in blocks_of(page)] == [
        ("fragment", "", "x\n", 3), ("pytest", "", "y\n", 7), ("program", "", "z\n", 10),
        ("file", "pkg/app.py", "f\n", 14), ("live", "pkg.app", "l\n", 18), ("redis", "", "r\n", 22),
    ]
    for wrong, why in [("<!-- fragmnet -->", "unknown marker"), ("<!-- file -->", "needs argument"),
                       ("<!-- pytest: x.py -->", "takes no argument"), ("<!-- live -->", "needs argument"),
                       ("<!-- file: ../app.py -->", "relative"), ("<!-- file: /tmp/app.py -->", "relative")]:
        page.write_text(f"{wrong}\n```python\nx\n```\n")
        with pytest.raises(ValueError, match=why):
            blocks_of(page)


def test_file_blocks_are_there_for_the_blocks_after_them_only(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nimport shop.extensions\n```\n"                              # before the files: fails
        "<!-- file: shop/__init__.py -->\n```python\n```\n"
        "<!-- file: shop/extensions.py -->\n```python\nNAME = 'first'\n```\n"
        "<!-- file: shop/extensions.py -->\n```python\nNAME = 'second'\n```\n"  # replaces the first
        "```python\nfrom shop.extensions import NAME\nassert NAME == 'second', NAME\n```\n"
        "<!-- pytest -->\n```python\nfrom shop import extensions\n\n\n"
        "def test_it() -> None:\n    assert extensions.NAME == 'second'\n```\n"
    )
    blocks = python_blocks([page])
    before, *_, program, module = blocks
    assert files_before(before, blocks) == {}
    assert files_before(program, blocks) == {"shop/__init__.py": "\n", "shop/extensions.py": "NAME = 'second'\n"}
    assert run_block(before, blocks, tmp_path / "a").returncode != 0
    for block, folder in ((program, "b"), (module, "c")):
        done = run_block(block, blocks, tmp_path / folder)
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_live_block_calls_the_app_its_page_serves(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- file: served.py -->\n```python\nfrom flask import Flask\nfrom flask_mcp import MCP\n\n"
        "app = Flask(__name__)\nMCP(app, name='served-from-the-page')\n```\n"
        "<!-- live: served -->\n```python\nimport json, urllib.request\n\n"
        "with urllib.request.urlopen('http://127.0.0.1:5000/mcp/health') as answer:\n"
        "    assert json.load(answer)['server'] == 'served-from-the-page'\n```\n"
        "<!-- live: served -->\n```python\nprint('names no server')\n```\n"
    )
    blocks = python_blocks([page])
    done = run_block(blocks[1], blocks, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    with pytest.raises(AssertionError, match="a live block calls the server at 127.0.0.1:5000"):
        run_block(blocks[2], blocks, tmp_path)


def test_a_redis_block_gets_the_tests_redis(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- redis -->\n```python\nimport os\nprint(os.environ['FLASK_REDIS_URL'])\n```\n")
    blocks = python_blocks([page])
    done = run_block(blocks[0], blocks, tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == REDIS_URL, done.stdout + done.stderr


def guides_toctree() -> ModuleType:
    """docs/_ext/guides_toctree.py, the Sphinx extension that fills in the index's Guides."""
    return load_file("guides_toctree", ROOT / "docs" / "_ext" / "guides_toctree.py")


def guides_in_order() -> list[str]:
    """The Guides of the site, as the built index lists them."""
    extension = guides_toctree()
    pages = [page.stem for page in (ROOT / "docs").glob("*.md")]
    index = extension.filled_in((ROOT / "docs" / "index.md").read_text(), pages)
    block = next(b for b in re.findall(r"```\{toctree\}(.*?)```", index, re.DOTALL) if ":caption: Guides" in b)
    return [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith(":")]


def test_the_guides_follow_a_readers_journey() -> None:
    guides = guides_in_order()
    assert len(guides) == len(set(guides))
    journey = ["tools", "context", "resources", "testing", "deploying", "authentication", "backends", "tasks",
               "observability", "apps", "skills"]
    assert [name for name in guides if name in journey] == journey
    # Every page of docs/ is in the site: the index's toctrees, or the Guides' placeholder.
    listed = set(guides) | {"index", "quickstart", "tutorial", "configuration", "api", "changes"}
    assert {page.stem for page in (ROOT / "docs").glob("*.md")} <= listed


def test_a_page_the_index_does_not_name_lands_where_the_placeholder_stands() -> None:
    extension = guides_toctree()
    index = "```{toctree}\n:caption: Guides\n\ntools\n%GUIDES%\nbackends\n```\n```{toctree}\napi\n```\n"
    filled = extension.filled_in(index, ["index", "tools", "backends", "api", "zebra", "login", "sub/page"])
    assert "tools\nlogin\nzebra\nbackends" in filled and "%GUIDES%" not in filled


# ---------------------------------------------------------------------- the package index's page

PYPI_PAGE = ROOT / "README.pypi.md"
#: Markdown links and images, reference definitions, autolinks, and HTML href/src attributes.
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)|^\s*\[[^\]]+\]:\s*<?(\S+?)>?\s*$|<((?:https?|ftp):[^>\s]+)>|"
                  r"""\b(?:href|src)\s*=\s*["']?([^"'\s>]+)""", re.MULTILINE)


def link_targets(markdown: str) -> list[str]:
    """Every link target of a Markdown text, fenced code left out."""
    prose = re.sub(r"^(`{3,}|~{3,}).*?^\1", "", markdown, flags=re.MULTILINE | re.DOTALL)
    return [next(group for group in match.groups() if group) for match in LINK.finditer(prose)]


def broken_on_the_index(markdown: str) -> list[str]:
    """The links of a long description that would not work on the package index's page:
    anything but an absolute http(s) URL (a path into the repository, an in-page anchor)."""
    return [target for target in link_targets(markdown) if not re.match(r"https?://", target)]


def test_the_link_check_finds_what_breaks_on_the_index() -> None:
    text = ("[a](docs/quickstart.md) [b](#install) ![c](img/logo.png) [ok](https://example.org/x)\n"
            "[ref]: ../CHANGES.rst\n<https://example.org/auto> <a href=\"LICENSE\">l</a>\n"
            "```python\nx = '[not](a/link)'\n```\n")
    assert link_targets(text) == ["docs/quickstart.md", "#install", "img/logo.png", "https://example.org/x",
                                  "../CHANGES.rst", "https://example.org/auto", "LICENSE"]
    assert broken_on_the_index(text) == ["docs/quickstart.md", "#install", "img/logo.png", "../CHANGES.rst",
                                         "LICENSE"]


def test_the_package_index_page_has_no_link_that_breaks_there() -> None:
    assert broken_on_the_index(PYPI_PAGE.read_text()) == []
    assert broken_on_the_index((ROOT / "README.md").read_text()), "the check no longer sees the README's links"


def test_the_package_index_page_is_the_long_description() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["readme"] == {"file": PYPI_PAGE.name, "content-type": "text/markdown"}


def install_line(page: Path) -> str:
    found = re.search(r'pip install "flask-mcp\[[^\]]*\]"', page.read_text())
    assert found, page
    return found.group(0)


def test_the_package_index_page_keeps_step_with_the_readme() -> None:
    readme = [b for b in PYTHON_BLOCKS if b.page.name == "README.md"]
    pypi = [b for b in PYTHON_BLOCKS if b.page == PYPI_PAGE]
    # The same first server, saved as the same file, and the same call from Python.
    assert [(b.mode, b.argument, b.code) for b in pypi] == [(b.mode, b.argument, b.code) for b in readme[:2]]
    assert [b.mode for b in pypi] == ["file", "live"]
    assert install_line(PYPI_PAGE) == install_line(ROOT / "README.md")


def test_every_extra_the_pages_install_exists() -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for page in PAGES:
        for named in re.findall(r"flask-mcp\[([\w,\s-]+)\]", page.read_text()):
            unknown = {extra.strip() for extra in named.split(",")} - extras
            assert not unknown, f"{page.name} installs flask-mcp[{named}]: no extra {unknown} in pyproject.toml"
    pypi_text = PYPI_PAGE.read_text()
    assert all(f"`{extra}`" in pypi_text for extra in extras - {"test"}), "the index's page names every extra"


def test_the_test_command_builds_the_package_and_checks_it() -> None:
    """CI runs ``python3 dev.py test``: its tox environments include the package check."""
    tox = (ROOT / "tox.ini").read_text()
    package = tox[tox.index("[testenv:package]"):].split("\n[", 1)[0]
    assert "python -m build" in package and "twine check --strict" in package
    environments = re.search(r'"(py-flaskoldest,py-flasklatest,[\w,-]+)"', (ROOT / "dev.py").read_text())
    assert environments is not None and "package" in environments.group(1).split(",")
