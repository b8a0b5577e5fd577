"""The in-process memory backend beyond the contract: pruning under a clock
that steps back, and copies of app objects in session data."""

from __future__ import annotations

import copy
from collections import OrderedDict, defaultdict

import pytest
from backend_cases import (
    TIMEOUT,
    full_session,
)
from conftest import FakeClock

from flask_mcp.backends.memory import MemorySessionStore, _copy


def _memory_ids(store: MemorySessionStore) -> list[str]:
    """The stored ids in idle order, oldest first (what a prune walks)."""
    return list(store._records)


def test_memory_prunes_expired_sessions_and_keeps_the_live_ones() -> None:
    """A read moves a session to the end, so the expired ones are the first
    ones and a prune stops at the first live one."""
    clock = FakeClock()
    store = MemorySessionStore(TIMEOUT, clock=clock, prune_interval=0)
    for i in range(100):
        store.create(full_session(f"s{i}"))
        clock.advance(0.5)
    assert store.get("s5") is not None  # idle 47.5 s: refreshed, moved to the end
    clock.advance(30)  # s0..s39 idle more than TIMEOUT now

    store.create(full_session("new"))

    live = [f"s{i}" for i in range(40, 100)]
    assert _memory_ids(store) == [*live, "s5", "new"]
    assert len(store) == len(live) + 2
    assert all(store.get(f"s{i}") is None for i in range(40) if i != 5)
    assert all(store.get(session_id) is not None for session_id in [*live, "s5", "new"])


def test_memory_a_session_created_again_under_its_id_moves_to_the_end() -> None:
    clock = FakeClock()
    store = MemorySessionStore(TIMEOUT, clock=clock, prune_interval=0)
    store.create(full_session("again"))
    clock.advance(30)
    store.create(full_session("idle"))
    clock.advance(20)
    store.create(full_session("again"))
    clock.advance(TIMEOUT - 19)  # "idle" idle past TIMEOUT, "again" not

    store.create(full_session("new"))

    assert _memory_ids(store) == ["again", "new"]


def test_memory_keeps_at_most_max_sessions_and_drops_the_longest_idle_first() -> None:
    """Sessions opened under client-chosen names and never used again: the
    store stops at its bound, however many arrive within the idle timeout."""
    clock = FakeClock()
    store = MemorySessionStore(TIMEOUT, clock=clock, max_sessions=50)
    for i in range(50):
        store.create(full_session(f"kept-{i}"))
        clock.advance(0.01)
    assert store.get("kept-0") is not None  # used again: moved to the end

    for i in range(1_000):
        store.create(full_session(f"abandoned-{i}"))

    assert len(store._records) == 50 and store.count().live == 50
    assert store.get("kept-0") is None and store.get("kept-1") is None  # the longest idle went first
    assert _memory_ids(store) == [f"abandoned-{i}" for i in range(950, 1_000)]
    assert MemorySessionStore().max_sessions == MemorySessionStore.MAX_SESSIONS == 10_000


def test_memory_prunes_at_most_once_per_interval_and_never_returns_an_expired_session() -> None:
    clock = FakeClock()
    store = MemorySessionStore(TIMEOUT, clock=clock, prune_interval=10)
    store.create(full_session("old"))
    clock.advance(TIMEOUT - 5)
    store.create(full_session("pruner"))  # prunes (nothing expired yet)
    clock.advance(6)  # "old" is expired; the last prune was 6 s ago

    store.create(full_session("skipped"))
    assert _memory_ids(store) == ["old", "pruner", "skipped"]
    assert len(store) == 2
    clock.advance(4)
    store.create(full_session("prunes"))
    assert _memory_ids(store) == ["pruner", "skipped", "prunes"]

    store.create(full_session("again"))
    clock.advance(TIMEOUT + 1)
    assert store.get("again") is None  # not pruned yet, but expired: gone
    assert _memory_ids(store) == ["pruner", "skipped", "prunes"]


def test_memory_a_clock_stepping_back_never_gets_a_live_session_pruned() -> None:
    """Sessions written before the clock stepped back sit out of idle order: a
    live one stops a prune early, and the expired ones behind it go when read."""
    clock = FakeClock()
    start = clock.now
    store = MemorySessionStore(TIMEOUT, clock=clock, prune_interval=TIMEOUT)
    store.create(full_session("expired1"))
    clock.now = start + 30
    store.create(full_session("live"))
    clock.now = start - 10  # back 40 s
    store.create(full_session("expired2"))
    clock.now = start + 70  # expired1 idle 70 s, live 40 s, expired2 80 s

    store.create(full_session("new"))

    assert _memory_ids(store) == ["live", "expired2", "new"]
    assert len(store) == 2
    assert store.get("expired2") is None
    assert store.get("live") is not None
    assert _memory_ids(store) == ["new", "live"]


def test_memory_prunes_after_the_clock_steps_back_without_waiting_for_it_to_catch_up() -> None:
    clock = FakeClock()
    start = clock.now
    store = MemorySessionStore(TIMEOUT, clock=clock, prune_interval=TIMEOUT)
    store.create(full_session("refreshed-in-the-past"))  # prunes; the last prune is at start
    clock.now = start - 1000
    assert store.get("refreshed-in-the-past") is not None
    clock.now = start - 900  # idle 100 s, and the clock is behind the last prune

    store.create(full_session("new"))

    assert _memory_ids(store) == ["new"]


class _Box:
    """App data that is not JSON: the memory backend keeps it as it is."""

    def __init__(self, items: object) -> None:
        self.items = items


def test_memory_copies_app_objects_in_session_data_as_deepcopy_does() -> None:
    store = MemorySessionStore()
    shared: dict[str, object] = {"n": 1}
    cycle: list[object] = []
    cycle.append(cycle)
    session = full_session()
    session.data = {"box": _Box([1]), "a": shared, "b": shared, "in_box": _Box(shared), "pair": ([1], "x")}
    session.data["cycle"] = cycle
    store.create(session)
    session.data["box"].items.append("after create")

    got = store.get(session.id)

    assert got is not None
    box = got.data["box"]
    assert isinstance(box, _Box) and box is not session.data["box"] and box.items == [1]
    assert got.data["a"] is got.data["b"] is got.data["in_box"].items
    assert got.data["a"] is not shared
    assert got.data["cycle"][0] is got.data["cycle"] is not cycle
    box.items.append(2)
    got.data["pair"][0].append(2)
    got.data["a"]["n"] = 2
    again = store.get(session.id)
    assert again is not None
    assert again.data["box"].items == [1]
    assert again.data["pair"] == ([1], "x")
    assert again.data["in_box"].items == {"n": 1}


@pytest.mark.parametrize(
    "value",
    [
        {"k": [1, 2.5, None, True, "s", {"n": []}], "big": 2**70},
        OrderedDict(a=[1]),
        defaultdict(list, a=[1]),
        {1: [1], (2, 3): {"t": []}},
        [[1], ([2], 3), {"x"}],
    ],
    ids=["json", "ordered-dict", "defaultdict", "non-string-keys", "tuple-and-set"],
)
def test_memory_record_copy_equals_deepcopy_and_shares_no_container(value: object) -> None:
    copied = _copy(value)

    assert type(copied) is type(value)
    assert copied == copy.deepcopy(value)

    def containers(item: object) -> list[int]:
        found: list[int] = []
        if isinstance(item, dict):
            found += [id(item)] + [i for v in item.values() for i in containers(v)]
        elif isinstance(item, (list, set)):
            found += [id(item)] + [i for v in item for i in containers(v)]
        elif isinstance(item, tuple):
            found += [i for v in item for i in containers(v)]
        return found

    assert not set(containers(copied)) & set(containers(value))
