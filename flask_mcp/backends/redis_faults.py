"""What the Redis modules share: which driver errors mean "Redis cannot be
reached now" (a ``503``, not a ``500``), and small helpers every Redis store uses."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis

from .contracts import BackendUnavailable, StoreCount

#: Faults that mean "Redis is not reachable right now" rather than a bug.
UNAVAILABLE: tuple[type[Exception], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,  # a replica during fail-over
    redis.exceptions.InvalidResponse,  # something that is not Redis answered
    # A Redis Cluster (redis_cluster.py) missing a primary, a slot being
    # moved, a slot no reachable node serves:
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.SlotNotCoveredError,
)


@contextmanager
def unavailable(what: str) -> Iterator[None]:
    """Driver errors of :data:`UNAVAILABLE` raised inside become :class:`BackendUnavailable`."""
    try:
        yield
    except Exception as exc:
        fault = as_unavailable(exc, what)
        if fault is None:
            raise
        raise fault from exc


def closed_bus(where: str) -> BackendUnavailable:
    """What a subscription asked of a bus after ``Backend.close`` raises: a
    reader that outlived its app must not open connections again."""
    return BackendUnavailable(f"Redis ({where}): the backend is closed")


def as_unavailable(exc: BaseException, what: str) -> BackendUnavailable | None:
    """The :class:`BackendUnavailable` that ``exc`` means, or ``None`` when it
    is not a "cannot be reached now" fault (a bug, a refusal: raise it as is)."""
    if isinstance(exc, UNAVAILABLE) or (
        isinstance(exc, (redis.exceptions.ResponseError, redis.exceptions.RedisClusterException))
        and _means_unavailable(exc)
    ):
        return BackendUnavailable(f"Redis ({what}) is unavailable: {exc}")
    return None


#: Error replies of a server that cannot take the command now, though it is up:
#: a primary short of the replicas ``min-replicas-to-write`` asks for, a replica
#: that lost its primary (``replica-serve-stale-data no``).
_UNAVAILABLE_REPLIES = ("NOREPLICAS", "MASTERDOWN")


def _means_unavailable(exc: Exception) -> bool:
    if isinstance(exc, redis.exceptions.RedisClusterException):
        # A cluster client that reaches no node at all says so in this
        # general class, raised from the connection error it met.
        return isinstance(exc.__cause__, UNAVAILABLE)
    return str(exc).startswith(_UNAVAILABLE_REPLIES)


def as_text(value: bytes | str) -> str:
    """Clients built with and without ``decode_responses`` both work."""
    return value.decode() if isinstance(value, bytes) else value


def count_keys(client: redis.Redis, prefix: str, where: str) -> StoreCount:
    """The keys under ``prefix`` (SCAN, in batches: it never blocks the
    server, but it walks the whole key space). Redis drops expired keys
    itself, so there are never expired ones to report."""
    with unavailable(where):
        return StoreCount(sum(1 for _ in client.scan_iter(match=key_pattern(prefix), count=1000)))


def key_pattern(prefix: str) -> str:
    """The ``SCAN`` pattern of every key under ``prefix`` (its glob characters escaped)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + "*"


def describe_client(client: redis.Redis) -> str:
    described = getattr(client, "flask_mcp_description", None)  # a cluster (redis_cluster.py)
    if isinstance(described, str):
        return described
    kwargs = client.connection_pool.connection_kwargs
    service = getattr(client.connection_pool, "service_name", None)  # a Sentinel-managed pool
    if service is not None:
        where = f"sentinel service {service}"
    elif "path" in kwargs:
        where = f"unix://{kwargs['path']}"
    else:
        where = f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
    return f"redis {where} db {kwargs.get('db', 0)}"
