"""Which backend ``MCP_BACKEND`` names: a registry of openers keyed by URI
scheme, and :func:`open_backend`, which also accepts an object the app already
has (a :class:`~.contracts.Backend`, a ``redis.Redis`` or ``RedisCluster``
client, a cachelib cache, or its own store implementing the contracts).

Built-in schemes are named here as ``module:function`` and imported on first
use, so choosing ``memory://`` never imports the Redis driver. A package adds
a scheme without touching this module: it declares an entry point in the group
``flask_mcp.backends`` whose name is the scheme and whose value is an opener
(see :class:`~.contracts.BackendOpener`)::

    [project.entry-points."flask_mcp.backends"]
    postgres = "flask_mcp_postgres:open_uri"
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import EntryPoint, entry_points
from typing import cast

from .contracts import (
    DEFAULT_EVENT_RETENTION,
    DEFAULT_IO_TIMEOUT,
    Backend,
    BackendOpener,
    BackendOptions,
    EventLog,
    MessageBus,
    SessionStore,
    redact_url,
)

#: The entry point group third-party backends register their schemes in.
ENTRY_POINT_GROUP = "flask_mcp.backends"

#: The schemes this package serves itself, and the opener of each.
BUILT_IN: dict[str, str] = {
    "memory": "flask_mcp.backends.memory:open_uri",
    "sqlite": "flask_mcp.backends.sqlite:open_uri",
    "redis": "flask_mcp.backends.redis:open_uri",
    "rediss": "flask_mcp.backends.redis:open_uri",
    "redis+unix": "flask_mcp.backends.redis:open_uri",
    "redis+cluster": "flask_mcp.backends.redis_cluster:open_uri",
    "rediss+cluster": "flask_mcp.backends.redis_cluster:open_uri",
    "redis+sentinel": "flask_mcp.backends.redis_sentinel:open_uri",
    "postgresql": "flask_mcp.backends.sql:open_uri",
    "postgresql+psycopg": "flask_mcp.backends.sql:open_uri",
    "postgres": "flask_mcp.backends.sql:open_uri",
    "mysql": "flask_mcp.backends.sql:open_uri",
    "mysql+pymysql": "flask_mcp.backends.sql:open_uri",
    "mariadb": "flask_mcp.backends.sql:open_uri",
    "mariadb+pymysql": "flask_mcp.backends.sql:open_uri",
}

ACCEPTED = (
    "MCP_BACKEND accepts 'memory://', 'sqlite://' (a file in the instance folder), "
    "'sqlite:///relative/path' (relative to the instance folder), 'sqlite:////absolute/path', "
    "'redis://...', 'rediss://...', 'redis+unix:///path/to/redis.sock', "
    "'redis+cluster://host:port,host:port' (or 'rediss+cluster://...'), "
    "'redis+sentinel://host:26379[,host:26379...]/service-name[/db]', "
    "'postgresql://user:password@host/database' (or 'postgresql+psycopg://...'), "
    "'mysql://user:password@host/database' or 'mariadb://...' (through PyMySQL), "
    f"a scheme an installed package registers (entry point group {ENTRY_POINT_GROUP!r}), "
    "a redis.Redis or redis.cluster.RedisCluster client, an SQLAlchemy engine or the app's Flask-SQLAlchemy object, "
    "a cachelib cache (e.g. the one Flask-Caching built), "
    "or an object implementing flask_mcp.backends.SessionStore (create, get, save, touch, delete)"
)


def _load(target: str) -> BackendOpener:
    module, _, attribute = target.partition(":")
    return cast(BackendOpener, getattr(importlib.import_module(module), attribute))


def installed_schemes() -> dict[str, EntryPoint]:
    """The schemes installed distributions register, by name (built-in ones excluded:
    a package cannot take ``sqlite`` or ``redis`` over by installing itself)."""
    return {ep.name.lower(): ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name.lower() not in BUILT_IN}


def opener_for(scheme: str) -> BackendOpener | None:
    """The opener registered for ``scheme`` (case-insensitive), or ``None``."""
    scheme = scheme.lower()
    if scheme in BUILT_IN:
        return _load(BUILT_IN[scheme])
    entry_point = installed_schemes().get(scheme)
    if entry_point is None:
        return None
    opener = entry_point.load()
    if not callable(opener):
        raise TypeError(
            f"the {ENTRY_POINT_GROUP!r} entry point {scheme!r} of {entry_point.value!r} is not callable: "
            "it must name a function (uri, options) -> Backend"
        )
    return cast(BackendOpener, opener)


def open_backend(
    spec: object,
    *,
    timeout: float,
    instance_path: str,
    io_timeout: float = DEFAULT_IO_TIMEOUT,
    retention: float = DEFAULT_EVENT_RETENTION,
) -> Backend:
    """Resolve ``MCP_BACKEND``.

    ``timeout`` is the idle timeout of a session (``MCP_SESSION_TIMEOUT``);
    ``io_timeout`` bounds every single backend call; ``retention`` is how long
    a resumable stream's events are kept after its last one. Nothing is connected
    here, so an app starts while Redis is down and recovers when it is back;
    call :attr:`Backend.check` to probe.
    """
    options = BackendOptions(timeout=timeout, instance_path=instance_path, io_timeout=io_timeout, retention=retention)
    if isinstance(spec, Backend):
        return spec
    if isinstance(spec, str):
        return _open_uri(spec, options)
    return _adopt(spec, options)


def _open_uri(uri: str, options: BackendOptions) -> Backend:
    scheme, sep, _ = uri.partition("://")
    if not sep:
        raise ValueError(f"MCP_BACKEND {uri!r} is not a URI. {ACCEPTED}.")
    opener = opener_for(scheme)
    if opener is None:
        raise ValueError(f"MCP_BACKEND {redact_url(uri)!r} has an unknown scheme {scheme.lower()!r}. {ACCEPTED}.")
    try:
        return opener(uri, options)
    except ValueError as exc:
        message = str(exc)
        raise ValueError(message if ACCEPTED in message else f"{message} {ACCEPTED}.") from exc


def _adopt(spec: object, options: BackendOptions) -> Backend:
    """A backend over an object the app already has."""
    # The optional drivers are only looked at when already imported: an
    # object of theirs cannot exist otherwise.
    redis_module = sys.modules.get("redis")
    if redis_module is not None and isinstance(spec, redis_module.Redis):
        from .redis import backend_from_client

        if getattr(spec.connection_pool, "is_master", True) is False:
            raise ValueError(
                f"MCP_BACKEND {spec!r} reads from Sentinel replicas, which refuse writes: "
                "give Sentinel.master_for(...) instead"
            )

        return backend_from_client(
            spec, timeout=options.timeout, io_timeout=options.io_timeout, owned=False, retention=options.retention
        )
    cluster_module = sys.modules.get("redis.cluster")
    if cluster_module is not None and isinstance(spec, cluster_module.RedisCluster):
        from .redis_cluster import adopt

        return adopt(spec, options)
    sqlalchemy_module = sys.modules.get("sqlalchemy")
    if sqlalchemy_module is not None and isinstance(spec, sqlalchemy_module.Engine):
        from .sql import adopt as adopt_engine

        return adopt_engine(spec, options)
    cachelib_module = sys.modules.get("cachelib")
    if cachelib_module is not None and isinstance(spec, cachelib_module.BaseCache):
        from .cachelib import CachelibSessionStore

        return Backend(
            sessions=CachelibSessionStore(spec, timeout=options.timeout),
            description=f"cachelib {type(spec).__name__}",
        )
    if isinstance(spec, SessionStore):
        bus = spec if isinstance(spec, MessageBus) else None
        events = spec if bus is not None and isinstance(spec, EventLog) else None
        return Backend(sessions=spec, bus=bus, events=events, description=f"custom store {type(spec).__name__}")
    raise ValueError(f"MCP_BACKEND {spec!r} is not supported. {ACCEPTED}.")
