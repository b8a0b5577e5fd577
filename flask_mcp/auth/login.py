"""A cookie never authenticates an MCP call: on the endpoint the Flask session
starts empty and is never saved, and Flask-Login's ``current_user`` is the
caller the bearer token names (anonymous until the token is checked, and when
nobody authenticated), on every thread that serves the call.

Which of the app's functions see the caller as ``current_user`` on the
endpoint: the tools, resources, prompts, completions and instructions (on
whichever thread runs them), the ``after_request`` and ``teardown_request``
hooks. Its ``before_request`` hooks run before the token is checked: they see
an anonymous user.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import Flask, Request, Response, current_app, g, has_request_context, request_tearing_down
from flask.sessions import SessionInterface, SessionMixin

logger = logging.getLogger("flask_mcp")

#: In ``g`` on the endpoint: the caller's user (``None``: anonymous), and what
#: Flask-Login had before the request (restored after it).
_CALLER = "_flask_mcp_caller_user"
_BEFORE = "_flask_mcp_login_user_before"
_NOTHING = object()
_ABSENT = object()
#: In ``app.extensions``: the app's requests to the endpoint restore Flask-Login's user after them.
_RESTORING = "flask_mcp.login_restored"
#: In ``app.extensions``: the checks :func:`at_endpoint_start` runs until they are done.
_PENDING = "flask_mcp.endpoint_start_checks"


def present(user: Any) -> None:
    """Make ``user`` (``None``: nobody) the request's caller: ``current_user``
    when the app uses Flask-Login (without it there is nothing to do)."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]  # LocalProxy's documented method
    manager = getattr(app, "login_manager", None)  # set by LoginManager.init_app
    if manager is None:
        return
    request_g = g._get_current_object()  # one proxy look-up, not one per use
    setattr(request_g, _CALLER, user)
    # Flask-Login internal, on purpose: current_user reads g._login_user
    # (flask_login.utils._get_user) and loads one from the session cookie, a
    # remember cookie or the app's request_loader only when it is missing.
    # Setting it is the one way to answer with our caller for this request
    # alone: login_user() would write the session and send user_logged_in on
    # every call, and request_loader is the app's and loses to a cookie.
    # tests/auth/test_login_bridge.py checks this on the Flask-Login installed.
    request_g._login_user = user if user is not None else manager.anonymous_user()


def begin_endpoint_request(app: Flask) -> None:
    """The start of every request to the endpoint, from :class:`EndpointSessions`
    (Flask opens the session before routing and before any hook): nobody until
    the token is checked.

    An app without Flask-Login pays for one attribute look-up here: the
    bookkeeping below (and the receiver that undoes it after the request)
    starts with the first request that finds a ``LoginManager`` on the app.
    Measured with the bench's call-2026 request in process under callgrind:
    doing it on every request cost 111 000 instructions of 606 000."""
    if getattr(app, "login_manager", None) is None:
        return
    if _RESTORING not in app.extensions:  # a LoginManager (perhaps set up after init_app): undo after each request
        request_tearing_down.connect(_restore, app)
        app.extensions[_RESTORING] = True
    request_g = g._get_current_object()
    if _BEFORE not in request_g:  # an app context shared by several requests (tests, the CLI) keeps g
        setattr(request_g, _BEFORE, request_g.get("_login_user", _NOTHING))
    present(None)


def check_sessions_guarded(app: Flask) -> None:
    """In the endpoint's views: when ``app.session_interface`` was replaced
    after ``init_app`` (Flask-Session set up later, say), this request's
    session is the cookie's; warn, guard it again for the next request, and
    make this request's caller nobody until the token is checked (the app's
    ``before_request`` hooks have seen the cookie's user this once)."""
    if isinstance(app.session_interface, EndpointSessions):
        return
    logger.warning("app.session_interface was replaced after mcp.init_app(): the MCP endpoint ignores "
                   "session cookies again from the next request on. Set it up before init_app.")
    guard_sessions(app, app.extensions["mcp"].settings.url_prefix)
    begin_endpoint_request(app)


def at_endpoint_start(app: Flask, check: Callable[[], bool]) -> None:
    """Run ``check`` at the start of requests to the endpoint, before any
    ``before_request`` hook, until it returns true (Flask-WTF's exemption of
    a ``CSRFProtect`` set up after ``init_app``): no hook on every request."""
    app.extensions.setdefault(_PENDING, []).append(check)


def carry(fn: Callable[[], None]) -> Callable[[], None]:
    """``fn`` for another thread of this request (wrap it in
    ``copy_current_request_context`` after this): there, where ``g`` starts
    empty, the caller is this request's again."""
    if not has_request_context() or _CALLER not in g:
        return fn
    user = getattr(g, _CALLER)

    def as_the_caller() -> None:
        present(user)
        fn()

    return as_the_caller


def _restore(sender: Flask, **extra: Any) -> None:
    """After the request's teardown hooks: Flask-Login's user as it was before
    (in an app context that outlives the request, the next request must not
    inherit the caller)."""
    before = g.pop(_BEFORE, _ABSENT)
    if before is _ABSENT:
        return
    g.pop(_CALLER, None)
    if before is _NOTHING:
        g.pop("_login_user", None)
    else:
        g._login_user = before


def login_manager_loader() -> Callable[[Any], Any] | None:
    """Flask-Login's ``user_loader`` (it takes ``get_id()``), when the app has one."""
    manager = getattr(current_app, "login_manager", None)
    return getattr(manager, "user_callback", None) if manager is not None else None


# ---------------------------------------------------------------------- the endpoint's session


class EndpointSession(dict, SessionMixin):  # type: ignore[type-arg]
    """The session of a request to the endpoint: empty, writable (the app's
    hooks may write to it), never saved. A plain dict: it needs none of
    ``SecureCookieSession``'s change tracking, whose constructor ran two
    calls per request."""


class EndpointSessions(SessionInterface):
    """The app's session interface, except on the endpoint's paths: there the
    session ignores the cookie and no ``Set-Cookie`` comes out of it.

    Opening the session is also where an endpoint request starts: Flask does
    it for every request, before routing and before any hook, so the caller
    is made nobody there rather than in a hook of our own (a blueprint
    ``url_value_preprocessor`` cost ~25 000 instructions per request in
    process, most of it Flask's dispatch of the hook; bench/README.md)."""

    def __init__(self, inner: SessionInterface, paths: frozenset[str], pending: list[Callable[[], bool]]) -> None:
        self.inner = inner
        self.paths = paths
        self.pending = pending

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def open_session(self, app: Flask, request: Request) -> SessionMixin | None:
        if request.path not in self.paths:
            return self.inner.open_session(app, request)
        if self.pending:
            self.pending[:] = [check for check in self.pending if not check()]
        if getattr(app, "login_manager", None) is not None:  # (begin_endpoint_request's own test, without its call)
            begin_endpoint_request(app)
        return EndpointSession()

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        if not isinstance(session, EndpointSession):
            self.inner.save_session(app, session, response)

    def make_null_session(self, app: Flask) -> Any:
        return self.inner.make_null_session(app)

    def is_null_session(self, obj: object) -> bool:
        # An endpoint session is never saved: Flask then skips save_session.
        return type(obj) is EndpointSession or self.inner.is_null_session(obj)


def endpoint_paths(url_prefix: str) -> frozenset[str]:
    """The endpoint's paths: ``/mcp`` and ``/mcp/health`` under the default prefix."""
    prefix = url_prefix.rstrip("/")
    return frozenset({prefix or "/", prefix + "/health"})


def guard_sessions(app: Flask, url_prefix: str) -> None:
    """Wrap the app's session interface, unless it is wrapped already."""
    current = app.session_interface
    if not isinstance(current, EndpointSessions):
        pending = app.extensions.setdefault(_PENDING, [])  # shared with a later re-wrap
        app.session_interface = EndpointSessions(current, endpoint_paths(url_prefix), pending)


def install(app: Flask, url_prefix: str) -> None:
    """Keep cookies out of the endpoint of ``app`` (see the module's docstring)."""
    guard_sessions(app, url_prefix)
