"""The cachelib backend beyond the contract: a cache that cannot write."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from backend_cases import (
    full_session,
)
from cachelib import FileSystemCache

from flask_mcp.backends.cachelib import CachelibSessionStore
from flask_mcp.backends.contracts import BackendUnavailable


def test_a_cache_that_cannot_write_is_unavailable(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    store = CachelibSessionStore(FileSystemCache(str(directory)))
    shutil.rmtree(directory)
    directory.write_text("a file where the cache folder was")

    with pytest.raises(BackendUnavailable, match="FileSystemCache"):
        store.create(full_session())
