"""``flask mcp check``: is this deployment ready? The configuration, a probe
record written to and read back from the backend (sessions, tasks, the
message bus), the Celery broker and workers (``MCP_TASK_RUNNER = "celery"``),
the authorization server's JWKS or introspection endpoint, and the endpoint
itself. Exit status 1 when anything failed (with
``--strict``, warned too), for deploy pipelines and container health checks."""

from __future__ import annotations

import json
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

from ..auth.tokens import InvalidToken, VerifierUnavailable
from ..auth.verifiers import IntrospectionVerifier, JWTVerifier
from ..backends.contracts import Backend, redact_url
from ..config import ConfigError, load_settings, unknown_key_message, unknown_keys
from ..features.schema import InputSpec
from ..protocol.methods import Methods
from ..protocol.prompt_methods import PromptMethods
from ..protocol.session import Session
from ..protocol.task_records import COMPLETED, TaskRecord
from .endpoint import Caller, Endpoint, caller_options

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"
#: How long the Celery probes wait: for the broker's connection, then for the
#: workers' answers to a ping and to "which tasks do you run" (seconds each).
CELERY_TIMEOUT = 1.0
#: Prefix of every probe record and channel, so an operator can tell them apart.
PROBE_PREFIX = "flask-mcp-check-"


@dataclass(frozen=True)
class Finding:
    status: str
    topic: str
    detail: str


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, (time.perf_counter() - start) * 1000


def check_configuration(app: Flask) -> Iterator[Finding]:
    state = app.extensions["mcp"]
    try:
        settings = load_settings(app.config, state.extension.config_overrides, app.name)
    except ConfigError as exc:
        yield Finding(FAIL, "configuration", str(exc))
        return
    yield Finding(OK, "configuration",
                  f"MCP_* settings valid: endpoint {settings.url_prefix}, server {settings.name} {settings.version}")
    reported = set(state.ignored_settings)  # what init_app warned about, read before its defaults
    for message in state.ignored_settings:
        yield Finding(WARN, "configuration", message)
    for key in unknown_keys(app.config):  # set after init_app
        if unknown_key_message(key) not in reported:
            yield Finding(WARN, "configuration", unknown_key_message(key))
    if settings.auth:
        if state.authenticator.decorated() is None and state.authenticator.configured is None:
            yield Finding(FAIL, "authentication", "MCP_AUTH is on but no token verifier is set: every request "
                          "would get 503 (use @mcp.token_verifier, MCP_TOKEN_VERIFIER, MCP_JWKS_URL or "
                          "MCP_INTROSPECTION_URL)")
        if settings.resource_url is None:
            yield Finding(WARN, "authentication", "MCP_RESOURCE_URL is not set: the protected-resource metadata "
                          "names the URL each request came in on (behind a proxy, set it or use ProxyFix)")
    asking = _taking_context(state.server.methods)
    if asking and not app.config.get("SECRET_KEY"):
        yield Finding(WARN, "configuration", f"SECRET_KEY is not set, and {', '.join(asking)} take a Context: "
                      "if they ask the client for input (elicitation, sampling, roots), 2026-07-28 calls fail")


def _taking_context(methods: Methods) -> list[str]:
    """The tools and prompts that take a ``Context``, so may ask the client for input,
    which on 2026-07-28 needs ``SECRET_KEY`` (it seals ``requestState``). Without
    them nothing needs the key, and Flask itself asks for none until a session is used."""
    prompts = next((f.prompts for f in methods.features if isinstance(f, PromptMethods)), None)
    found = []
    for kind, provider in (("tool", methods.tools), ("prompt", prompts)):
        if provider is None:
            continue
        for definition in provider.definitions():
            spec = getattr(provider.find(definition["name"]), "input", None)
            if isinstance(spec, InputSpec) and spec.context_param:
                found.append(f"{kind} {definition['name']!r}")
    return found


def check_backend(backend: Backend, debug: bool) -> Iterator[Finding]:
    where = backend.describe()
    topic = "backend"
    try:
        _, ms = _timed(backend.check)
    except Exception as exc:
        yield Finding(FAIL, topic, f"{where} is unreachable: {exc}")
        return
    yield Finding(OK, topic, f"{where} reachable ({ms:.1f} ms)")
    if where.startswith("memory") and not debug:
        yield Finding(WARN, topic, "memory:// keeps sessions in one process: with several gunicorn workers "
                      "legacy clients lose theirs (use sqlite:// or redis://)")
    yield from _probe_session(backend)
    yield from _probe_task(backend)
    yield from _probe_bus(backend)


def _probe_session(backend: Backend) -> Iterator[Finding]:
    session = Session(id=PROBE_PREFIX + secrets.token_hex(12), protocol_version="2025-11-25",
                      client_info={"name": "flask mcp check"}, data={"probe": True})
    try:
        def round_trip() -> Session | None:
            backend.sessions.create(session)
            try:
                return backend.sessions.get(session.id)
            finally:
                backend.sessions.delete(session.id)

        read, ms = _timed(round_trip)
    except Exception as exc:
        yield Finding(FAIL, "sessions", f"writing a probe session failed: {exc}")
        return
    if read is None or read.data != session.data or read.client_info != session.client_info:
        yield Finding(FAIL, "sessions", "a probe session written to the backend did not read back the same")
    else:
        yield Finding(OK, "sessions", f"probe session written, read back and deleted ({ms:.1f} ms)")


def _probe_task(backend: Backend) -> Iterator[Finding]:
    if backend.tasks is None:
        yield Finding(SKIP, "tasks", "this backend keeps no tasks: the tasks extension is not offered")
        return
    now = time.time()
    # No task store deletes: the probe expires in ten seconds and is pruned later. Written
    # as ended, so that flask mcp sessions does not list it among the running tasks.
    record = TaskRecord(task_id=PROBE_PREFIX + secrets.token_hex(12), status=COMPLETED, created_at=now,
                        updated_at=now, ttl_ms=10_000, status_message="flask mcp check probe")
    try:
        def round_trip() -> TaskRecord | None:
            backend.tasks.create(record)  # type: ignore[union-attr]
            return backend.tasks.get(record.task_id)  # type: ignore[union-attr]

        read, ms = _timed(round_trip)
    except Exception as exc:
        yield Finding(FAIL, "tasks", f"writing a probe task failed: {exc}")
        return
    if read != record:
        yield Finding(FAIL, "tasks", "a probe task written to the backend did not read back the same")
    else:
        yield Finding(OK, "tasks", f"probe task written and read back ({ms:.1f} ms; it expires in 10 s)")


def _probe_bus(backend: Backend) -> Iterator[Finding]:
    if backend.bus is None:
        yield Finding(WARN, "message bus", "this backend has none: answers to server requests on legacy "
                      "sessions, cancellation and subscriptions are refused")
        return
    channel = PROBE_PREFIX + secrets.token_hex(12)
    message = {"probe": channel}
    try:
        def round_trip() -> Any:
            subscription = backend.bus.subscribe([channel])  # type: ignore[union-attr]
            try:
                backend.bus.publish(channel, message)  # type: ignore[union-attr]
                return subscription.get(timeout=5.0)
            finally:
                subscription.close()

        received, ms = _timed(round_trip)
    except Exception as exc:
        yield Finding(FAIL, "message bus", f"publishing a probe message failed: {exc}")
        return
    if received is None or received[1] != message:
        yield Finding(FAIL, "message bus", "a probe message published on the bus was not received within 5 s")
    else:
        yield Finding(OK, "message bus", f"probe message published and received ({ms:.1f} ms)")


def check_rate_limits(app: Flask) -> Iterator[Finding]:
    """Where the rate-limit counters live answers (when MCP_RATE_LIMIT or its storage is set):
    a failing storage lets every request through, so it is a failure here."""
    state = app.extensions["mcp"]
    if not (state.settings.rate_limit or state.settings.rate_limit_storage):
        return
    try:
        strategy = state.rate_limits.strategy()
        reachable = bool(strategy.storage.check())
    except Exception as exc:  # a storage URI limits cannot open, a driver missing
        yield Finding(FAIL, "rate limits", f"their storage cannot be used: {exc}")
        return
    where = state.rate_limits.description
    if reachable:
        yield Finding(OK, "rate limits", f"counters in {where} reachable")
    else:
        yield Finding(FAIL, "rate limits", f"counters in {where} unreachable: limits would not be enforced")


def check_task_queue(app: Flask, timeout: float = CELERY_TIMEOUT) -> Iterator[Finding]:
    """With ``MCP_TASK_RUNNER = "celery"``: the broker of ``app.extensions["celery"]``
    accepts a connection, and workers answer a ping and run ``flask_mcp.run_task``.
    A broker that refuses fails every task tool call (503); no worker answering is
    a warning (tasks wait in the queue: workers may be scaled to zero, or start
    after the web tier); workers that all lack the task would drop every message."""
    if app.extensions["mcp"].settings.task_runner != "celery":
        return
    topic = "task queue"
    celery = app.extensions.get("celery")
    if celery is None:
        yield Finding(FAIL, topic, 'MCP_TASK_RUNNER = "celery" but app.extensions["celery"] holds no Celery app: '
                      "every task tool call would fail (see docs/celery.md)")
        return
    from ..tasks.celery import TASK_NAME

    connection = celery.connection_for_write(connect_timeout=timeout)
    url = celery.conf.broker_write_url
    where = redact_url(url) if isinstance(url, str) and "://" in url else connection.as_uri()  # no password shown
    try:
        _, ms = _timed(lambda: connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0,
                                                            interval_max=0, timeout=timeout))
    except Exception as exc:  # kombu's OperationalError, a transport it cannot load...
        yield Finding(FAIL, topic, f"the Celery broker {where} is unreachable: {exc} (every task tool call "
                      "would get 503)")
        return
    finally:
        connection.release()
    yield Finding(OK, topic, f"Celery broker {where} reachable ({ms:.1f} ms)")
    try:
        replies = celery.control.ping(timeout=timeout)
        workers = sorted({name for reply in replies for name in reply})
        registered: dict[str, Any] = {}
        if workers:
            registered = celery.control.inspect(destination=workers, timeout=timeout).registered() or {}
    except Exception as exc:
        yield Finding(FAIL, topic, f"the Celery workers could not be asked over {where}: {exc}")
        return
    if not workers:
        yield Finding(WARN, topic, f"no Celery worker answered a ping within {timeout:g} s: task tool calls would "
                      "wait in the queue until one starts (celery -A your_module worker)")
        return
    running = [name for name in workers if any(str(task).split(" ")[0] == TASK_NAME
                                                for task in registered.get(name) or ())]
    silent = [name for name in workers if name not in registered]
    lacking = [name for name in workers if name in registered and name not in running]
    yield Finding(OK, topic, f"{len(workers)} Celery worker{'' if len(workers) == 1 else 's'} answered: "
                  f"{', '.join(workers)}")
    if running:
        yield Finding(OK, topic, f"{TASK_NAME} registered on {', '.join(running)}")
    elif lacking:
        yield Finding(FAIL, topic, f"no worker that answered registered {TASK_NAME}: they would drop every task "
                      "(start the worker with the app module that sets MCP_TASK_RUNNER = \"celery\")")
    if running and lacking:
        yield Finding(WARN, topic, f"{', '.join(lacking)} did not register {TASK_NAME}: fine if they consume "
                      "other queues; on the same queue they would drop the tasks they take")
    if silent:
        yield Finding(WARN, topic, f"{', '.join(silent)} did not say within {timeout:g} s which tasks they run")


def check_authorization_server(app: Flask) -> Iterator[Finding]:
    state = app.extensions["mcp"]
    settings = state.settings
    if not settings.auth:
        yield Finding(SKIP, "authentication", "MCP_AUTH is off")
        return
    verifier = state.authenticator.decorated() or state.authenticator.configured
    if isinstance(verifier, JWTVerifier):
        yield _fetch_jwks(verifier.jwks.url, settings.auth_timeout)
    elif isinstance(verifier, IntrospectionVerifier):
        yield _probe_introspection(verifier)
    elif verifier is not None:
        yield Finding(OK, "authentication",
                      f"token verifier {type(verifier).__name__}: not probed (it reaches nothing flask-mcp knows of)")


def _fetch_jwks(url: str, timeout: float) -> Finding:
    topic = "JWKS"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - the configured URL
            document = json.loads(response.read())
    except (OSError, ValueError) as exc:
        return Finding(FAIL, topic, f"{url} could not be read: {exc}")
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list) or not keys:
        return Finding(FAIL, topic, f"{url} holds no keys: no token could be verified")
    try:
        import jwt

        usable = jwt.PyJWKSet.from_dict(document).keys
    except Exception as exc:  # PyJWKSetError and friends: keys it cannot use
        return Finding(FAIL, topic, f"{url}: its keys are not usable: {exc}")
    kids = ", ".join(str(key.key_id) for key in usable if key.key_id) or "no kid"
    return Finding(OK, topic, f"{url} reached: {len(usable)} usable key(s) ({kids})")


def _probe_introspection(verifier: IntrospectionVerifier) -> Finding:
    """Introspect a made-up token: a healthy endpoint that accepts our client
    credentials answers ``active: false``."""
    topic = "introspection"
    try:
        verifier.verify(PROBE_PREFIX + secrets.token_urlsafe(24))
    except InvalidToken:
        return Finding(OK, topic, f"{verifier.url} reached: a made-up token was reported inactive, as it should")
    except VerifierUnavailable as exc:
        return Finding(FAIL, topic, f"{exc} (check the URL and MCP_INTROSPECTION_CLIENT_ID/SECRET)")
    return Finding(FAIL, topic, f"{verifier.url} reported a made-up token active: it accepts anything")


def check_endpoint(caller: Caller) -> Iterator[Finding]:
    state = current_app.extensions["mcp"]
    if state.settings.auth and not (caller.token or caller.subject):
        yield Finding(SKIP, "endpoint", "MCP_AUTH is on: pass --token (or --as) to probe the endpoint")
        return
    try:
        endpoint = Endpoint(caller=caller)
        client = endpoint.client()
        endpoint.request("server/discover", client=client)
        tools = endpoint.list_all("tools/list", "tools", client)
    except click.ClickException as exc:
        yield Finding(FAIL, "endpoint", exc.format_message())
        return
    yield Finding(OK, "endpoint", f"{state.settings.url_prefix} answered server/discover and tools/list "
                  f"({len(tools)} tool{'' if len(tools) == 1 else 's'})")


@click.command("check")
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--celery-timeout", type=click.FloatRange(min=0.05), default=CELERY_TIMEOUT, show_default=True,
              metavar="SECONDS", help="How long to wait for the Celery broker, then its workers (with Celery tasks).")
@caller_options
@with_appcontext
def check_command(strict: bool, as_json: bool, celery_timeout: float, caller: Caller) -> None:
    """Check the configuration, the backend, the Celery workers and the authorization server.

    Exit status 0 when everything is fine, 1 when a check failed (or, with
    --strict, warned).
    """
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    state = app.extensions["mcp"]
    findings: list[Finding] = []
    for group in (check_configuration(app), check_backend(state.backend, app.debug),
                  check_task_queue(app, celery_timeout), check_rate_limits(app),
                  check_authorization_server(app), check_endpoint(caller)):
        for finding in group:
            findings.append(finding)
            if not as_json:
                colour = {OK: "green", WARN: "yellow", FAIL: "red"}.get(finding.status)
                status = click.style(f"{finding.status:<5}", fg=colour)
                click.echo(f"{status} {finding.topic:<15} {finding.detail}")
    failed = [f for f in findings if f.status == FAIL or (strict and f.status == WARN)]
    if as_json:
        click.echo(json.dumps({"ok": not failed, "findings": [f.__dict__ for f in findings]}, indent=2))
    elif failed:
        click.echo(f"\n{len(failed)} check{'' if len(failed) == 1 else 's'} failed.", err=True)
    else:
        click.echo("\nAll checks passed.")
    if failed:
        raise SystemExit(1)
