"""The official MCP conformance suite against the fixture app under real
gunicorn, held to the committed expected-failures baseline by the project's
own runner (tests/conformance/runner.py; the suite's version is pinned by
tests/conformance/package.json and package-lock.json).

The baseline (tests/conformance/baseline/<leg>.yml) may only shrink: the run
fails on a failing scenario that is not listed and on a listed one that passes.
The last two tests prove the runner enforces exactly that, on real suite runs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conftest import ROOT, GunicornServer, load_file, unavailable

RUNNER = ROOT / "tests" / "conformance" / "runner.py"
BASELINE = ROOT / "tests" / "conformance" / "baseline"


def run(url: str, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    if shutil.which("npm") is None:
        unavailable("npm is needed to install the MCP conformance suite (tests/conformance/package.json)")
    return subprocess.run(
        [sys.executable, str(RUNNER), url, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def conformance_server() -> Iterator[GunicornServer]:
    # Two workers: answers and cancellations must cross processes (through the SQLite bus).
    # Keep-alive beyond Node's 4 s reuse of idle connections (the suite is a Node client):
    # with gunicorn's 2 s, a connection left idle for about 2 s (a 2 s task polled on
    # another connection) may be closed just as the client reuses it ("other side closed").
    server = GunicornServer("tests.conformance.app:app", workers=2, threads=16, extra_args=["--keep-alive", "5"])
    yield server
    server.stop()


@pytest.mark.conformance
@pytest.mark.e2e
def test_conformance_suite_passes_everything_outside_the_baseline(
    conformance_server: GunicornServer, tmp_path: Path
) -> None:
    proc = run(conformance_server.url, "--report", str(tmp_path / "report"))
    print(proc.stdout)
    assert proc.returncode == 0, (
        f"conformance run failed (exit {proc.returncode}): a failure outside the baseline or a baseline "
        f"entry that now passes (then delete it from {BASELINE}).\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    )
    closing = proc.stdout.strip().splitlines()[-1]
    assert closing.endswith(" 0 failed") and int(closing.split()[0]) > 300, closing
    # Every leg ran: four revisions and the extensions (tasks-*) leg.
    for leg in ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "extensions"):
        assert f"leg {leg} done" in proc.stdout


@pytest.mark.conformance
@pytest.mark.e2e
def test_runner_fails_on_a_baseline_entry_that_passes(conformance_server: GunicornServer, tmp_path: Path) -> None:
    baseline = tmp_path / "baseline"
    baseline.mkdir()
    (baseline / "2025-03-26.yml").write_text("server:\n  - server-session-lifecycle\n")
    proc = run(conformance_server.url, "--legs", "2025-03-26", "--baseline", str(baseline), timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "server-session-lifecycle: passes but is listed in baseline/2025-03-26.yml" in proc.stdout


@pytest.mark.conformance
@pytest.mark.e2e
def test_runner_fails_on_a_failure_the_baseline_does_not_list(
    example_server: GunicornServer, tmp_path: Path
) -> None:
    # The example app has none of the suite's fixture tools: the scenario fails.
    proc = run(example_server.url, "--legs", "2026-07-28", "--scenario", "tools-call-simple-text",
               "--baseline", str(tmp_path), timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[2026-07-28] tools-call-simple-text:" in proc.stdout and "failed check(s)" in proc.stdout
    assert not proc.stdout.strip().splitlines()[-1].endswith(" 0 failed")


# ---------------------------------------------------------------- the runner's own logic, without npm


def load_runner() -> ModuleType:
    return load_file("conformance_runner", RUNNER)


def test_runner_reads_the_suite_listing_into_legs() -> None:
    runner = load_runner()
    listing = runner.parse_listing(
        "Server scenarios (test against a server):\n"
        "  - server-initialize [2025-06-18,2025-11-25]\n"
        "  - server-session-lifecycle [2025-03-26,2025-06-18,2025-11-25]\n"
        "  - server-stateless [2026-07-28]\n"
        "  - tasks-lifecycle [extension]\n"
    )
    assert listing["server-session-lifecycle"] == ["2025-03-26", "2025-06-18", "2025-11-25"]
    assert runner.legs_of(listing) == ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "extensions"]


def test_runner_reads_the_baseline_formats_the_suite_writes(tmp_path: Path) -> None:
    runner = load_runner()
    path = tmp_path / "leg.yml"
    path.write_text("# comment\nserver: []\n")
    assert runner.read_baseline(path) == set()
    path.write_text("server:\n  - tasks-lifecycle  # flaky upstream\n  - 'caching'\nclient:\n  - not-ours\n")
    assert runner.read_baseline(path) == {"tasks-lifecycle", "caching"}
    runner.write_baseline(path, {"b", "a"})
    assert path.read_text() == "server:\n  - a\n  - b\n" and runner.read_baseline(path) == {"a", "b"}
    assert runner.read_baseline(tmp_path / "missing.yml") == set()


def test_runner_strict_rules(tmp_path: Path) -> None:
    runner = load_runner()
    results = tmp_path / "results"
    for name, statuses in {"passes": ["SUCCESS", "WARNING"], "fails": ["SUCCESS", "FAILURE"],
                           "listed-passes": ["SUCCESS"], "listed-fails": ["FAILURE"]}.items():
        folder = results / f"server-{name}-2026-12-01T10-00-00-000Z"
        folder.mkdir(parents=True)
        checks = [{"id": f"{name}-{i}", "status": s, "errorMessage": "boom"} for i, s in enumerate(statuses)]
        (folder / "checks.json").write_text(json.dumps(checks))
    leg = runner.Leg("2026-07-28", ["passes", "fails", "listed-passes", "listed-fails", "never-ran"],
                     {"listed-passes", "listed-fails", "gone"})
    runner.collect(leg, results)
    problems = "\n".join(leg.problems())
    assert "fails: 1 failed check(s): fails-1: boom" in problems  # a failure the baseline does not list
    assert "listed-passes: passes but is listed" in problems  # a stale baseline entry
    assert "never-ran: the suite reported no result" in problems
    assert "gone: listed in baseline/2026-07-28.yml but the suite has no such scenario" in problems
    assert "listed-fails" not in problems and "\n[2026-07-28] passes" not in problems
    assert len(leg.problems()) == 4
    assert runner.summary([leg])[-1] == "3 passed, 3 failed"  # checks; the unreported scenario counts 1
