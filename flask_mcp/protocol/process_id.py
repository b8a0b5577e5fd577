"""This process's id without a system call, and locks made by the process
that uses them (:class:`ProcessLock`).

``os.getpid()`` is one (glibc does not cache it), and hot paths ask on every
request whether gunicorn forked them since their state was made: the SQLite
connection pool, the cancellation subscription, the Redis session cache. An
at-fork hook keeps :data:`current` right in a forked child instead."""

from __future__ import annotations

import os
import threading
from typing import Any

#: This process's id (read it as ``process_id.current``: a name imported from
#: here would keep the parent's value after a fork).
current = os.getpid()


def _forked() -> None:
    global current
    current = os.getpid()


os.register_at_fork(after_in_child=_forked)


#: Held only while a :class:`ProcessLock` makes its lock (no I/O, so no
#: greenlet switch, under it).
_MAKING = threading.Lock()


class ProcessLock:
    """A lock made by the process that uses it, on first use. Under
    ``gunicorn --preload -k gevent`` the app (and its backend) is built in
    the master before gevent patches ``threading``: a lock made then is an OS
    lock, and a greenlet waiting on it while another holds it across I/O
    would block the worker's only thread for good. A forked child also gets
    a fresh lock, never one a parent's thread held at the fork."""

    def __init__(self) -> None:
        self._pid = 0
        self._lock: Any = None

    def _current(self) -> Any:
        if self._pid != current:
            with _MAKING:
                if self._pid != current:
                    self._lock, self._pid = threading.Lock(), current
        return self._lock

    def __enter__(self) -> bool:
        lock = self._lock if self._pid == current else self._current()  # the usual case without a call
        return bool(lock.acquire())

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()
