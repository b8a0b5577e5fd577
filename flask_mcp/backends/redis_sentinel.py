"""Redis behind Sentinel: ``MCP_BACKEND = "redis+sentinel://..."``.

Sentinel watches a primary and its replicas and promotes a replica when the
primary fails. The client asks the sentinels where the primary is whenever
it opens a connection, so after a failover every new connection (sessions,
the bus, event logs, tasks, the invalidation listener of the session cache
and the rate-limit counters, all built from this client's pool) reaches the
promoted replica; one still open to the demoted primary moves when it fails
(a write there is refused and retried on the new primary). Everything else is the plain Redis backend
(:func:`~.redis.backend_from_client`): while no primary is known, requests
answer 503 (:class:`~.contracts.BackendUnavailable`), never 500.

The URL::

    redis+sentinel://[[username]:password@]host[:port][,host[:port]...]/service-name[/db][?query]

* the hosts are the sentinels (port 26379 unless given), tried in turn;
* ``service-name`` is the name the sentinels monitor (``sentinel monitor
  <service-name> ...``), ``db`` the database number (0);
* the username and password are the primary's (``requirepass`` / ACL);
* the query may add ``sentinel_username`` and ``sentinel_password`` when
  the sentinels require their own (sentinel's ``requirepass``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    from redis.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "MCP_BACKEND 'redis+sentinel://...' needs the redis package: pip install flask-mcp[redis]"
    ) from exc

from .contracts import DEFAULT_IO_TIMEOUT, Backend, BackendOptions, redact_url
from .redis import backend_from_client

SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379
#: Query keys the URL accepts (anything else is a start-up error, not a silent no-op).
QUERY_KEYS = ("sentinel_username", "sentinel_password")
FORM = "redis+sentinel://[[username]:password@]host[:port][,host[:port]...]/service-name[/db]"


@dataclasses.dataclass(frozen=True)
class SentinelURL:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    service_name: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None


def _invalid(url: str, why: str) -> ValueError:
    return ValueError(f"MCP_BACKEND {redact_url(url)!r} is not a valid Sentinel URL ({FORM}): {why}")


def _host_port(url: str, item: str) -> tuple[str, int]:
    if item.startswith("["):  # [IPv6]:port
        host, _, rest = item[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else rest
    else:
        host, _, port_text = item.partition(":")
    if not host:
        raise _invalid(url, f"a sentinel address {item!r} has no host")
    if not port_text:
        return host, DEFAULT_SENTINEL_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise _invalid(url, f"a sentinel address {item!r} has no valid port")
    return host, int(port_text)


def parse_sentinel_url(url: str) -> SentinelURL:
    """Split a ``redis+sentinel://`` URL; a :class:`ValueError` says what is wrong."""
    parts = urlsplit(url)
    if parts.scheme.lower() != SCHEME:
        raise _invalid(url, f"the scheme is not {SCHEME!r}")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username = password = None
    if userinfo:
        user, has_password, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if has_password else None
    if not hosts:
        raise _invalid(url, "it names no sentinel")
    sentinels = tuple(_host_port(url, item.strip()) for item in hosts.split(","))
    path = [unquote(segment) for segment in parts.path.split("/") if segment]
    if not path:
        raise _invalid(url, "it names no service (the path is the name the sentinels monitor)")
    if len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise _invalid(url, f"the path {parts.path!r} is not /service-name or /service-name/db")
    query: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in QUERY_KEYS:
            raise _invalid(url, f"unknown query key {key!r} (accepted: {', '.join(QUERY_KEYS)})")
        query[key] = value
    return SentinelURL(
        sentinels=sentinels,
        service_name=path[0],
        db=int(path[1]) if len(path) == 2 else 0,
        username=username,
        password=password,
        sentinel_username=query.get("sentinel_username") or None,
        sentinel_password=query.get("sentinel_password") or None,
    )


class BoundedSentinel(Sentinel):
    """A :class:`~redis.sentinel.Sentinel` whose every failure to find the
    primary is a :class:`~redis.sentinel.MasterNotFoundError` (a connection
    error: 503): redis-py lets a sentinel's error reply (an ACL refusal, a
    plain Redis that knows no ``SENTINEL`` command) through as is."""

    def discover_master(self, service_name: str) -> tuple[str, int]:
        try:
            address: tuple[str, int] = super().discover_master(service_name)  # type: ignore[no-untyped-call, unused-ignore]
        except redis.exceptions.RedisError as exc:
            # Concise: redis-py's own message holds the whole repr of every sentinel client.
            why = "none of them" if isinstance(exc, MasterNotFoundError) else f"one answered {exc}"
            raise MasterNotFoundError(
                f"no primary for {service_name!r} from the sentinels {self.addresses()} ({why})"
            ) from exc
        return address

    def addresses(self) -> str:
        kwargs = [client.connection_pool.connection_kwargs for client in self.sentinels]
        return ", ".join(f"{k.get('host')}:{k.get('port')}" for k in kwargs)


class PrimaryFollowingPool(SentinelConnectionPool):
    """A pool whose connections leave a former primary within a second.

    After ``SENTINEL FAILOVER`` the old primary goes on answering as a
    primary until Sentinel demotes it, seconds later (about 15 s measured
    here), and drops what was written to it meanwhile when it resyncs from
    the new one. redis-py asks the sentinels only when it opens a
    connection, so pooled connections would go on writing there. Here, at
    most once every ``recheck_interval`` seconds, handing out a connection
    first asks the sentinels; when the primary moved, idle connections to the
    old one are closed and busy ones are closed when given back."""

    #: Seconds between two questions to the sentinels (one round trip each).
    recheck_interval = 1.0

    def __init__(self, service_name: str, sentinel_manager: Sentinel, **kwargs: Any) -> None:
        super().__init__(service_name, sentinel_manager, **kwargs)  # type: ignore[no-untyped-call, unused-ignore]
        self._checked_at = time.monotonic()

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        if now - self._checked_at >= self.recheck_interval:
            self._checked_at = now
            try:
                self.get_master_address()  # type: ignore[no-untyped-call, unused-ignore]
            except redis.exceptions.RedisError:
                pass  # no primary named now: the command itself will say so
        return super().get_connection(*args, **kwargs)


def client_from_sentinel_url(url: str, *, io_timeout: float = DEFAULT_IO_TIMEOUT) -> redis.Redis:
    """A client of the primary the sentinels name, bounded as
    :func:`~.redis.client_from_url`'s is. The sentinels are asked in turn,
    each for at most ``io_timeout`` divided by their number, so finding the
    primary takes at most ``io_timeout`` too."""
    spec = parse_sentinel_url(url)
    per_sentinel = io_timeout / len(spec.sentinels)
    sentinel_kwargs: dict[str, Any] = {
        "socket_timeout": per_sentinel,
        "socket_connect_timeout": per_sentinel,
        # Not redis-py's default (three retries with backoff, seconds): the
        # next sentinel is the retry.
        "retry": Retry(NoBackoff(), 0),
    }
    if spec.sentinel_username:
        sentinel_kwargs["username"] = spec.sentinel_username
    if spec.sentinel_password:
        sentinel_kwargs["password"] = spec.sentinel_password
    sentinel = BoundedSentinel(list(spec.sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call, unused-ignore]
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call, unused-ignore]
        spec.service_name,
        connection_pool_class=PrimaryFollowingPool,
        db=spec.db,
        username=spec.username,
        password=spec.password,
        socket_timeout=io_timeout,
        socket_connect_timeout=io_timeout,
        # A connection to a demoted primary fails (redis-py turns its
        # READONLY into a connection error); the one retry asks the
        # sentinels again and reaches the promoted replica.
        retry=Retry(NoBackoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)),
        retry_on_timeout=False,
        health_check_interval=30,
    )
    return client


def open_uri(uri: str, options: BackendOptions) -> Backend:
    """``redis+sentinel://``: the Redis backend on the primary Sentinel names."""
    client = client_from_sentinel_url(uri, io_timeout=options.io_timeout)
    backend = backend_from_client(
        client, timeout=options.timeout, io_timeout=options.io_timeout, owned=True, retention=options.retention
    )
    sentinel: Sentinel = client.connection_pool.sentinel_manager  # type: ignore[attr-defined]
    close_client = backend.close

    def close() -> None:
        close_client()
        sentinel.close()

    return dataclasses.replace(backend, description=redact_url(uri), close=close)

