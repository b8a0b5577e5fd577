"""``flask mcp stdio``: the app's MCP server on standard input and output, for
hosts that launch a local server as a command (Claude Desktop, Cursor,
Claude Code, the MCP Inspector).

The MCP stdio transport: newline-delimited JSON-RPC messages in on standard
input and out on standard output, nothing else on standard output, anything
else (logs) on standard error. Every message goes through the app's own
endpoint in-process (:mod:`.relay`), so what a stdio client gets is what an
HTTP client gets. Standard output is kept for the protocol alone: the
process's file descriptor 1 is pointed at standard error for as long as the
command runs, so a ``print()`` in a tool, a logging handler writing to
``sys.stdout`` or a child process writing to its inherited stdout cannot
corrupt the stream.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import click
from flask.cli import with_appcontext

from ..protocol import jsonrpc
from ..protocol.versions import SUPPORTED_VERSIONS
from .endpoint import Caller, Endpoint, caller_options
from .relay import Relay

#: Seconds the requests still running when standard input closes get to finish.
GRACE = 10.0


class Output:
    """The protocol's stream: one message per line, written whole, flushed at once."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self._lock = threading.Lock()
        self.broken = False

    def __call__(self, message: Any) -> None:
        line = jsonrpc.encode_stdlib(message) + b"\n"  # JSON escapes every newline inside strings
        with self._lock:
            if self.broken:
                return
            try:
                self.stream.write(line)
                self.stream.flush()
            except (BrokenPipeError, ValueError, OSError):  # the client closed its end
                self.broken = True


@contextmanager
def protocol_stdout() -> Iterator[IO[bytes]]:
    """Standard output for the protocol alone; everything else written to
    it, from Python or from a child process, goes to standard error meanwhile."""
    stdout, stderr = sys.stdout, sys.stderr
    stdout.flush()
    fd = _fileno(stdout)
    err_fd = _fileno(stderr)
    if fd is None or err_fd is None:  # not a real file (click's test runner): Python-level only
        sys.stdout = stderr
        try:
            yield stdout.buffer
        finally:
            sys.stdout = stdout
        return
    kept = os.dup(fd)
    os.dup2(err_fd, fd)
    sys.stdout = stderr
    stream = os.fdopen(kept, "wb")
    try:
        yield stream
    finally:
        sys.stdout = stdout
        try:
            stream.flush()
        except OSError:  # the client closed its end
            pass
        os.dup2(kept, fd)  # standard output is the protocol's stream again, for whatever follows
        try:
            stream.close()
        except OSError:
            pass


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


@click.command("stdio")
@caller_options
@with_appcontext
def stdio_command(caller: Caller) -> None:
    """Serve MCP on standard input and output (for local hosts).

    For clients that start a local server as a command: each line on
    standard input is a JSON-RPC message for the app's endpoint, and each
    answer is a line on standard output (the MCP stdio transport). Logs go to
    standard error. Every revision the endpoint serves is served here.
    """
    endpoint = Endpoint(caller=caller)
    settings = endpoint.state.settings
    if settings.auth and endpoint.token is None:
        raise click.UsageError(
            "MCP_AUTH is on, so every request needs a caller: give --as SUBJECT (with --scope SCOPE...) "
            "to serve as that principal, or --token TOKEN."
        )
    _log_to_stderr()
    stdin = sys.stdin.buffer
    with protocol_stdout() as stdout:
        relay = Relay(endpoint.app, url=settings.url_prefix, deliver=Output(stdout), token=endpoint.token)
        click.echo(
            f"flask-mcp: serving {settings.name or endpoint.app.name} over stdio "
            f"(revisions {', '.join(SUPPORTED_VERSIONS)}); standard input closed or Ctrl-C ends it",
            err=True,
        )
        grace = GRACE
        try:
            with _sigterm_ends_reading():
                for line in iter(stdin.readline, b""):
                    relay.handle(line)
        except (KeyboardInterrupt, _Terminated):
            grace = 0.0
        finally:
            relay.close(grace)


class _Terminated(Exception):
    """SIGTERM arrived: the host is stopping the server."""


@contextmanager
def _sigterm_ends_reading() -> Iterator[None]:
    """SIGTERM ends the command as standard input closing does, without the
    grace period: the session still ends cleanly (not where signals cannot be
    set, off the main thread)."""

    def terminate(signum: int, frame: Any) -> None:
        raise _Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _log_to_stderr() -> None:
    """flask-mcp's own warnings to standard error (Python's last-resort
    handler does that too, but only from WARNING and without a name)."""
    log = logging.getLogger("flask_mcp")
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
        log.addHandler(handler)
