"""The message bus on Redis PUBLISH/SUBSCRIBE: what one worker publishes
reaches the subscribers of every worker on every host. A process's
subscriptions share one pub/sub connection (redis_pubsub.py): a subscribed
connection cannot run commands, so it is not one of the client's pool."""

from __future__ import annotations

import json
from collections.abc import Sequence

import redis

from .contracts import DEFAULT_IO_TIMEOUT, Message
from .redis_faults import closed_bus, describe_client, unavailable
from .redis_pubsub import RedisSubscription, SharedPubSub, connection_maker

__all__ = ["DEFAULT_CHANNEL_PREFIX", "RedisMessageBus", "RedisSubscription"]

#: Pub/sub channels ignore the database number, so they get their own prefix.
DEFAULT_CHANNEL_PREFIX = "flask-mcp:bus:"


class RedisMessageBus:
    """PUBLISH/SUBSCRIBE on prefixed channels (pub/sub ignores the database
    number, so the prefix is what keeps two apps on one server apart)."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        channel_prefix: str = DEFAULT_CHANNEL_PREFIX,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
    ) -> None:
        self.client = client
        self.channel_prefix = channel_prefix
        self.io_timeout = io_timeout
        self.where = describe_client(client)
        #: This process's pub/sub connection, made like the client's own (on
        #: Sentinel: to the primary the sentinels name when it connects).
        self.shared = SharedPubSub(
            connection_maker(client.connection_pool), where=self.where, io_timeout=io_timeout
        )

    @property
    def closed(self) -> bool:
        """Set by :meth:`close` (``Backend.close``)."""
        return self.shared.closed

    def close(self) -> None:
        """Close the subscription connection; no new subscription after this."""
        self.shared.close()

    def publish(self, channel: str, message: Message) -> None:
        payload = json.dumps(message)
        with unavailable(self.where):
            self.client.publish(self.channel_prefix + channel, payload)

    def subscribe(self, channels: Sequence[str]) -> RedisSubscription:
        if self.closed:
            raise closed_bus(self.where)
        subscription = RedisSubscription(self.channel_prefix, channels)
        if subscription.names:
            try:
                with unavailable(self.where):
                    self.shared.add(subscription, subscription.names)
            except BaseException:
                subscription.close()
                raise
        return subscription
