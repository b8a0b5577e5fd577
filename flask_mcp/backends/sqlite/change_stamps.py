"""Change stamps shared by the processes of one machine: a small memory-mapped
file beside a SQLite database, one 8-byte slot per bucket of keys.

A process that changes or deletes a stored session writes a new random stamp
into the session's slot after committing. A process that keeps a session's
record in memory notes the slot's stamp *before* it reads the record, and
trusts its copy only while the slot still holds that stamp: another worker's
change or ``DELETE`` is seen on the next request, without the read
transaction (file locks, page lookups) SQLite would need to tell. Reading a
slot is a memory load, not a system call.

SQLite's WAL mode already needs shared memory between the processes of one
machine (the ``-shm`` file), so a file that holds sessions is never shared
across machines, and neither are its stamps."""

from __future__ import annotations

import logging
import mmap
import os
import random
import zlib

logger = logging.getLogger("flask_mcp")

#: Slots in a stamps file (a power of two). A change to one session makes the
#: cached copies of the others in its slot be read again once, nothing worse.
SLOTS = 4096
_SIZE = SLOTS * 8

#: Stamps come from a per-process generator, reseeded in every child after
#: ``fork``: forked workers would otherwise draw the same sequence, and two
#: writers storing the same stamp in one slot would hide the second change.
_random = random.Random()
os.register_at_fork(after_in_child=_random.seed)


class ChangeStamps:
    """The stamps file at ``path``, created (zero-filled) by whichever process
    opens it first. ``None`` from :meth:`open` means it could not be used, and
    callers then read the database every time."""

    def __init__(self, words: memoryview) -> None:
        self._words = words

    @classmethod
    def open(cls, path: str) -> ChangeStamps | None:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            logger.warning("Session cache off: cannot open %s (%s)", path, exc)
            return None
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                # Every opener grows it to the same size: never shrunk, so a
                # mapping in another process never loses its pages.
                os.ftruncate(fd, _SIZE)
            elif size != _SIZE:
                logger.warning("Session cache off: %s is %d bytes, not %d", path, size, _SIZE)
                return None
            mapping = mmap.mmap(fd, _SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError) as exc:
            logger.warning("Session cache off: cannot map %s (%s)", path, exc)
            return None
        finally:
            os.close(fd)  # the mapping keeps the file
        return cls(memoryview(mapping).cast("Q"))

    def read(self, key: str) -> int:
        """The stamp of ``key``'s slot now."""
        return self._words[zlib.crc32(key.encode()) & (SLOTS - 1)]

    def bump(self, key: str) -> None:
        """Mark ``key`` changed (after the change is committed)."""
        self._words[zlib.crc32(key.encode()) & (SLOTS - 1)] = _random.getrandbits(64)
