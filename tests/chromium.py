"""Headless Chromium driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``): no driver binary, no websocket library. The
browser is looked up on PATH (``chromium``, ``chromium-browser``,
``google-chrome``) or taken from ``$CHROMIUM``; nothing is installed here.
Used by tests/e2e/test_example_app_ui.py and tests/cli/test_cli_preview.py."""

from __future__ import annotations

import itertools
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

TIMEOUT = 20.0


# Hands our pipe ends to Chromium as fds 3 and 4 (moved out of the way first,
# in case they are 3 or 4 already), then becomes Chromium.
_LAUNCH = (
    "import fcntl, os, sys; "
    "ends = [fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3]]; "
    "os.dup2(ends[0], 3); os.dup2(ends[1], 4); os.execv(sys.argv[3], sys.argv[3:])"
)


def _chromium() -> str | None:
    named = os.environ.get("CHROMIUM")
    if named:
        return shutil.which(named)
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


class Browser:
    """One headless Chromium, spoken to in DevTools protocol messages (JSON
    followed by a NUL byte) on file descriptors 3 (to it) and 4 (from it)."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_browser_r, self._out = os.pipe()
        self._in, from_browser_w = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, str(to_browser_r), str(from_browser_w), binary, "--headless",
             "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(to_browser_r, from_browser_w),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._ids = itertools.count(1)
        self._buffer = b""
        self.events: list[dict[str, Any]] = []

    def close(self) -> None:
        try:
            self._write({"id": next(self._ids), "method": "Browser.close"})
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        os.close(self._out)
        os.close(self._in)

    def _write(self, message: dict[str, Any]) -> None:
        os.write(self._out, json.dumps(message).encode() + b"\0")

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._in, 65536)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)  # type: ignore[no-any-return]

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send a command and return its result; events met meanwhile are kept."""
        message: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._write(message)
        deadline = time.monotonic() + TIMEOUT
        while True:
            answer = self._read(deadline)
            if answer.get("id") == message["id"]:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})  # type: ignore[no-any-return]
            self.events.append(answer)

    def wait_for_event(self, method: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            seen = len(self.events)
            self.events.append(self._read(deadline))

    def open(self, url: str) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.send(f"{domain}.enable", session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for_event("Page.loadEventFired", session)
        return Page(self, session)


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def evaluate(self, expression: str) -> Any:
        result = self.browser.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=self.session
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_until(self, expression: str) -> Any:
        """The value of ``expression`` once it is truthy (polled, bounded)."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            value = self.evaluate(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.05)

    def errors(self) -> list[str]:
        """Uncaught exceptions, console.error/assert calls and error log entries, in any frame."""
        found = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(json.dumps(params["exceptionDetails"])[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(json.dumps(params.get("args"))[:500])
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(params["entry"].get("text", ""))
        return found


@contextmanager
def headless_chromium() -> Iterator[Browser]:
    """A headless Chromium with a throw-away profile; without one, the test
    skips (and fails in CI, where .ci/run installs it)."""
    binary = _chromium()
    if binary is None:
        reason = ("Chromium is not installed: on Debian/Ubuntu `apt-get install -y chromium`, "
                  "or point $CHROMIUM at a Chrome/Chromium binary")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="flask-mcp-chromium-") as profile:
        browser = Browser(binary, Path(profile))
        try:
            yield browser
        finally:
            browser.close()
