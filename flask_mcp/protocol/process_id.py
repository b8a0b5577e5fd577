"""This process's id without a system call.

``os.getpid()`` is one (glibc does not cache it), and hot paths ask on every
request whether gunicorn forked them since their state was made: the SQLite
connection pool, the cancellation subscription, the Redis session cache. An
at-fork hook keeps :data:`current` right in a forked child instead."""

from __future__ import annotations

import os

#: This process's id (read it as ``process_id.current``: a name imported from
#: here would keep the parent's value after a fork).
current = os.getpid()


def _forked() -> None:
    global current
    current = os.getpid()


os.register_at_fork(after_in_child=_forked)
