"""Per-process session copies on a Redis Cluster: one :class:`TrackedCache`
(``redis_tracking.py``) per primary, since ``CLIENT TRACKING`` is a node's
own business: a node reports changes only to keys read from it, to a
listener connected to it.

A key's copy is looked up, and read, at the node the client's slot map
names. What a cluster adds to the single-server reasoning:

* a slot moved away (resharding): ``MIGRATE`` deletes the key on the old
  node, which reports it, so the copy there is dropped; a tracked read on a
  node that no longer owns the slot is answered ``MOVED``, and the caller
  reads through the cluster client instead (which learns the new owner);
* a failover: the failed primary's listener breaks, and its copies are
  dropped as on one server; the promoted replica gets a cache of its own;
* a key changed by this process is forgotten on every node's cache.

As on one server, a copy is never served past ``cache_max_age``."""

from __future__ import annotations

import threading
from typing import Any, Protocol

import redis
from redis.cluster import ClusterNode, RedisCluster

from .redis_tracking import MISSING, TrackedCache


class ClusterClient(Protocol):
    """What the copies use of ``redis_cluster.ClusterClient`` (kept as a protocol
    so that this module, which that one imports, does not import it back)."""

    @property
    def cluster(self) -> RedisCluster: ...


def node_pool(client: ClusterClient, node: ClusterNode, max_connections: int) -> redis.ConnectionPool:
    """A new pool to ``node`` made like the cluster client's own pool to it."""
    own = client.cluster.get_redis_connection(node).connection_pool
    kwargs = {k: v for k, v in own.connection_kwargs.items() if "maint_notifications" not in k}
    return redis.ConnectionPool(connection_class=own.connection_class, max_connections=max_connections, **kwargs)


class ClusterCopies:
    """The session store's copies, kept by the node each key lives on."""

    def __init__(self, client: ClusterClient, *, size: int, io_timeout: float) -> None:
        self._client = client
        self._size = size
        self._io_timeout = io_timeout
        self._caches: dict[str, TrackedCache] = {}
        self._lock = threading.Lock()
        self._closed = False

    @property
    def live(self) -> bool:
        """Whether some node's copies may be served now."""
        return any(cache.live for cache in list(self._caches.values()))

    @property
    def refused(self) -> str | None:
        """Why a node refused tracking, if one did (its keys are then read every time)."""
        return next((cache.refused for cache in list(self._caches.values()) if cache.refused), None)

    def get(self, key: str) -> Any:
        cache = self._cache_for(key)
        return None if cache is None else cache.get(key)

    def read(self, key: str, read_at: float) -> Any:
        cache = self._cache_for(key)
        return MISSING if cache is None else cache.read(key, read_at)

    def forget(self, key: str) -> None:
        for cache in list(self._caches.values()):
            cache.forget(key)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            caches, self._caches = list(self._caches.values()), {}
        for cache in caches:
            cache.close()

    def _cache_for(self, key: str) -> TrackedCache | None:
        """The cache of the node owning ``key``'s slot; ``None`` while the
        slot's owner is unknown or the cluster unreachable (no copy then)."""
        try:
            node: ClusterNode | None = self._client.cluster.get_node_from_key(key)
        except (redis.exceptions.RedisError, IndexError):
            return None
        if node is None:
            return None
        cache = self._caches.get(node.name)
        if cache is None:
            with self._lock:
                if self._closed:
                    return None
                cache = self._caches.get(node.name)
                if cache is None:
                    pool = node_pool(self._client, node, max_connections=4)
                    cache = TrackedCache(pool, size=self._size, io_timeout=self._io_timeout)
                    self._caches[node.name] = cache
        return cache
