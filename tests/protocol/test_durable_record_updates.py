"""The record of a durable call as its queue worker keeps it
(flask_mcp/protocol/durable_records.py): each run counted, progress written at
most once per interval, and the end, whichever way the call ends."""

from __future__ import annotations

from typing import Any

import pytest

from flask_mcp.backends.memory import MemoryEventLog, MemoryTaskStore
from flask_mcp.protocol.durable import DurableWriter, run_durable
from flask_mcp.protocol.durable_records import DurableRecord, progress_text
from flask_mcp.protocol.request_info import RequestInfo
from flask_mcp.protocol.task_records import CANCELLED, COMPLETED, FAILED, TaskRecord
from flask_mcp.protocol.versions import REVISIONS

KEY = "session/streamrecords1"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def setup() -> tuple[MemoryEventLog, MemoryTaskStore, TaskRecord, Clock]:
    clock = Clock()
    log = MemoryEventLog()
    log.append(KEY, 0, {"message": None, "final": False})  # primed by the web worker
    store = MemoryTaskStore(clock=clock)
    record = TaskRecord("t1", created_at=clock.now, updated_at=clock.now, ttl_ms=60_000, queued=True, durable=True,
                        stream_id="streamrecords1", tool="x")
    store.create(record)
    return log, store, record, clock


def request() -> RequestInfo:
    return RequestInfo(REVISIONS["2025-11-25"], "tools/call", {"name": "x"}, {}, request_id=3)


def progress(value: float, message: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"progressToken": "t", "progress": value, "total": 4}
    if message:
        params["message"] = message
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


def stored(store: MemoryTaskStore) -> TaskRecord:
    record = store.get("t1")
    assert record is not None
    return record


def test_a_run_counts_writes_progress_at_most_once_per_interval_and_ends_the_record() -> None:
    log, store, _, clock = setup()
    seen: list[tuple[str | None, int, bool]] = []

    def answer(job: RequestInfo) -> dict[str, Any]:
        job.emit(progress(1, "Fetching"))
        job.emit(progress(2, "Parsing"))  # within the interval: not written
        current = stored(store)
        seen.append((current.status_message, current.runs, current.queued))
        clock.now += 1.5
        job.emit(progress(3))
        seen.append((stored(store).status_message, 0, False))
        return {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}

    record = DurableRecord(store, "t1", clock=clock, interval=1.0)
    assert run_durable(answer, request(), DurableWriter(log, KEY, None, keep_alive=0), record=record) == "completed"
    assert seen == [("Fetching", 1, False), ("3/4", 0, False)]
    ended = stored(store)
    assert ended.status == COMPLETED and ended.terminal and store.unfinished(10) == []


def test_a_rerun_counts_a_second_run_and_a_cancelled_call_ends_cancelled() -> None:
    log, store, _, clock = setup()
    first = DurableWriter(log, KEY, None, keep_alive=0)
    first.begin()
    DurableRecord(store, "t1", clock=clock).began()  # the first worker dies here
    assert stored(store).runs == 1 and store.unfinished(10) != []
    record = DurableRecord(store, "t1", clock=clock)
    assert run_durable(lambda job: None, request(), DurableWriter(log, KEY, None, keep_alive=0), record=record) \
        == "cancelled"
    assert (stored(store).runs, stored(store).status) == (2, CANCELLED)


def test_a_call_that_raises_ends_its_record_failed() -> None:
    log, store, _, clock = setup()

    def answer(job: RequestInfo) -> Any:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        run_durable(answer, request(), DurableWriter(log, KEY, None, keep_alive=0),
                    record=DurableRecord(store, "t1", clock=clock))
    assert stored(store).status == FAILED


def test_progress_text_prefers_the_message_then_progress_over_total() -> None:
    assert progress_text({"progress": 1, "total": 4, "message": "Half"}) == "Half"
    assert progress_text({"progress": 1.5, "total": 4}) == "1.5/4"
    assert progress_text({"progress": 2}) == "2"
    assert progress_text({"message": 3}) is None and progress_text(None) is None
