"""A subscription of the SQL buses: a queue its process's one listener (or
poller) fills, which reports the bus unavailable once that listener broke."""

from __future__ import annotations

import time

from ..contracts import BackendUnavailable, Message
from ..memory import MemorySubscription


class SqlSubscription(MemorySubscription):
    """What arrived is read first; after that, a subscription whose listener
    broke raises :class:`BackendUnavailable` on every ``get`` (messages may
    have been missed meanwhile, as with a broken Redis subscription): the
    caller subscribes again, which reconnects."""

    _fault: str | None = None

    def fail(self, reason: str) -> None:
        """The listener broke: wake the reader, which raises once its queue is empty."""
        with self._ready:
            self._fault = reason
            self._ready.notify_all()

    def ready(self) -> bool:
        return bool(self._pending) or self._fault is not None

    def get(self, timeout: float) -> tuple[str, Message] | None:
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._ready:
            while not self._pending:
                if self._fault is not None:
                    raise BackendUnavailable(self._fault)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return None
                self._ready.wait(remaining)
            return self._pending.popleft()
