"""``flask mcp call`` as a person runs it: a real ``flask`` process whose
standard input and standard error are pseudo-terminals (Python's ``pty``),
standard output a pipe, as in ``result=$(flask mcp call ...)``. The tool
reports progress (drawn as a bar), logs, and asks a question whose form is
answered field by field. Without a terminal, the same call prints plain
progress lines and says in plain words what the tool asked."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import unavailable

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
TRIP = 'booked {"budget": 12.5, "city": "Paris", "fare": "business", "insured": true, "nights": 3}\n'


def flask_command(*args: str) -> list[str]:
    found = shutil.which("flask", path=str(Path(sys.executable).parent)) or shutil.which("flask")
    if found is None:
        unavailable("the flask command is not installed beside this Python")
    return [found, "--app", str(TESTS / "stdio_app.py"), "mcp", *args]


class Terminal:
    """A child process on two pseudo-terminals: one it reads (standard
    input), one it writes its messages to (standard error)."""

    def __init__(self, *args: str) -> None:
        self.keyboard, stdin = pty.openpty()
        self.screen, stderr = pty.openpty()
        fcntl.ioctl(stderr, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # rows, columns
        env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
        env["PYTHONPATH"] = str(TESTS)
        self.process = subprocess.Popen(flask_command(*args), stdin=stdin, stdout=subprocess.PIPE, stderr=stderr,
                                        cwd=ROOT, env=env)
        os.close(stdin)
        os.close(stderr)
        self.shown = ""  # everything written to standard error so far
        self._seen = 0  # how much of it expect() has consumed

    def expect(self, text: str, timeout: float = 20) -> str:
        """Wait until ``text`` is shown (after what earlier calls matched); what came before it."""
        deadline = time.monotonic() + timeout
        while text not in self.shown[self._seen:]:
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never shown; the screen has {self.shown[self._seen:]!r}")
            ready, _, _ = select.select([self.screen], [], [], 0.1)
            if ready:
                try:
                    self.shown += os.read(self.screen, 4096).decode(errors="replace")
                except OSError:  # the child closed its end
                    time.sleep(0.05)
        start = self._seen
        end = self.shown.index(text, start)
        self._seen = end + len(text)
        return self.shown[start:end]

    def type(self, text: str) -> None:
        os.write(self.keyboard, text.encode() + b"\n")

    def finish(self, timeout: float = 20) -> tuple[int, str]:
        """The exit status and standard output; the rest of the screen is read too."""
        out, _ = self.process.communicate(timeout=timeout)
        while True:
            ready, _, _ = select.select([self.screen], [], [], 0.1)
            if not ready:
                break
            try:
                chunk = os.read(self.screen, 4096)
            except OSError:
                break
            if not chunk:
                break
            self.shown += chunk.decode(errors="replace")
        return self.process.returncode, out.decode()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        os.close(self.keyboard)
        os.close(self.screen)


@pytest.fixture
def terminal() -> Iterator[type[Terminal]]:
    opened: list[Terminal] = []

    class Opened(Terminal):
        def __init__(self, *args: str) -> None:
            super().__init__(*args)
            opened.append(self)

    yield Opened
    for each in opened:
        each.close()


def test_a_call_at_a_terminal_draws_progress_and_asks_the_tools_question(terminal: type[Terminal]) -> None:
    term = terminal("call", "plan_trip")
    term.expect("\r[########----------------]  33% 1/3  looking at the calendar")
    term.expect("[info] the calendar is free\r\n")  # above the bar, which is drawn again
    term.expect("[################--------]  67% 2/3  asking the traveller")
    term.expect("Where to?")
    term.expect("Answer (accept, decline, cancel) [accept]: ")
    term.type("accept")
    term.expect("City (string): ")
    term.type("P")
    term.expect("Error: must be at least 2 characters long")
    term.expect("City (string): ")
    term.type("Paris")
    term.expect("nights (integer 1..14, default 3): ")
    term.type("")  # the default
    term.expect("fare (economy/business): ")
    term.type("first")
    term.expect("Error: choose one of economy, business")
    term.expect("fare (economy/business): ")
    term.type("business")
    term.expect("In euros")  # the field's description, before its prompt
    term.expect("budget (number, optional: Enter skips it): ")
    term.type("12.5")
    term.expect("insured (boolean, optional: Enter skips it): ")
    term.type("y")
    term.expect("[########################] 100% 3/3  booked")  # the call, sent again with the answers
    status, out = term.finish()
    assert status == 0, term.shown
    assert out == TRIP  # standard output holds the result alone
    assert term.shown.endswith("\r\x1b[K")  # the bar is taken off the screen at the end


def test_declining_at_the_terminal_is_the_tools_to_handle(terminal: type[Terminal]) -> None:
    term = terminal("call", "plan_trip", "--log-level", "warning")
    before = term.expect("Answer (accept, decline, cancel) [accept]: ")
    assert "[info]" not in before  # asked for warnings and worse only
    term.type("decline")
    status, out = term.finish()
    assert (status, out) == (0, "no trip (decline)\n")


@pytest.mark.usefixtures("no_shell_flask_mcp_variables")
def test_without_a_terminal_progress_is_plain_lines_and_a_question_fails_in_plain_words() -> None:
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    done = subprocess.run(flask_command("call", "plan_trip"), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=60)
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "[progress 1/3] looking at the calendar",
        "[info] the calendar is free",
        "[progress 2/3] asking the traveller",
        "Error: The tool 'plan_trip' asked 'Where to?' (city: string; nights: integer, optional; fare: choice; "
        "budget: number, optional; insured: boolean, optional). flask mcp call can answer a question only when "
        "its standard input is a terminal: run the command in a terminal to answer it.",
    ]
    assert "\x1b" not in done.stderr and "\r" not in done.stderr


def test_a_task_waiting_for_input_is_answered_at_the_terminal(terminal: type[Terminal]) -> None:
    term = terminal("call", "archive")
    term.expect(": input_required]")
    term.expect("Archive everything?")
    term.expect("[accept]: ")
    term.type("")  # accept, the default
    term.expect("tags (any of old/draft/spam, comma-separated): ")
    term.type("old, junk")
    term.expect("Error: not among the choices: junk")
    term.expect("tags (any of old/draft/spam, comma-separated): ")
    term.type("old, spam")
    term.expect(": completed]")
    status, out = term.finish()
    assert (status, out) == (0, "archived ['old', 'spam']\n"), term.shown
