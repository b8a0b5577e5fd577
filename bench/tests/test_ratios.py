"""The benchmark's arithmetic (bench/run.py): how interleaved slices are merged,
which floor a server is paired with, and how the ratios the issue's targets
are read from come out of the rounds. No servers or wrk here: the figures are
made up so that each expected value can be worked out by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

RUN_PY = Path(__file__).resolve().parent.parent / "run.py"


@pytest.fixture(scope="module")
def run() -> Any:
    spec = importlib.util.spec_from_file_location("bench_run_under_test", RUN_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def _slice(requests: int, p50: int, **extra: Any) -> dict[str, Any]:
    part = {
        "requests": requests, "duration_us": 1_000_000, "bytes": requests * 100, "connect": 0, "read": 0,
        "write": 0, "status": 0, "timeout": 0, "bad_body": 0, "socket_errors": 0,
        "p50_us": p50, "p90_us": p50 * 2, "p99_us": p50 * 3, "max_us": p50 * 4, "mean_us": float(p50),
        "server_cpu_pct": 90.0, "core_busy_pct": 92.0, "other_on_core_pct": 2.0, "steal_pct": 0.0,
    }
    return part | extra


def test_slices_merge_into_one_measurement(run: Any) -> None:
    merged = run.merge_slices([
        _slice(1000, 3000, status=2, server_cpu_pct=80.0),
        _slice(3000, 1000, bad_body=1, server_cpu_pct=100.0),
        _slice(2000, 1500),
    ])
    assert merged["requests"] == 6000
    assert merged["duration_us"] == 3_000_000
    assert merged["rps"] == pytest.approx(2000.0)
    assert (merged["status"], merged["bad_body"]) == (2, 1)  # errors add up, none is lost
    assert merged["p50_us"] == 1500  # the median slice's, not the mean of the three (1833)
    assert merged["max_us"] == 12000
    assert merged["mean_us"] == pytest.approx((1000 * 3000 + 3000 * 1000 + 2000 * 1500) / 6000)
    assert merged["server_cpu_pct"] == pytest.approx(90.0)


def _spec(run: Any, key: str, **fields: Any) -> Any:
    return run.ServerSpec(key, fields.pop("kind", "gunicorn"), "app:app", ("call-2026",), **fields)


class _Running:
    def __init__(self, spec: Any) -> None:
        self.spec = spec


def test_each_server_is_paired_with_the_floor_of_its_worker_class(run: Any) -> None:
    sync = _Running(_spec(run, "floor/sync", role="floor"))
    gthread = _Running(_spec(run, "floor/gthread", role="floor", worker_class="gthread"))
    floors = {"sync": sync, "gthread": gthread}
    assert run.pair_floor(_spec(run, "flask-mcp/sync/sqlite"), floors) is sync
    assert run.pair_floor(_spec(run, "flask-mcp/gthread/sqlite", worker_class="gthread"), floors) is gthread
    assert run.pair_floor(_spec(run, "sdk/stateful", kind="uvicorn", role="sdk"), floors) is sync
    assert run.pair_floor(_spec(run, "floor/sync", role="floor"), floors) is None  # a floor is not paired
    # Without the gthread floor (--no-gthread), the sync floor stands in.
    assert run.pair_floor(_spec(run, "flask-mcp/gthread/sqlite", worker_class="gthread"), {"sync": sync}) is sync


def _cell(run: Any, server: str, workload: str, rounds: list[tuple[float, float | None]],
          floor: str = "floor/sync") -> dict[str, Any]:
    """A cell summary from (req/s, paired floor req/s) per round."""
    cell = run.Cell(server, workload, 8)
    for number, (rps, floor_rps) in enumerate(rounds, 1):
        result = _slice(int(rps), 1000) | {"rps": rps, "rss_kb": 40_000, "round": number}
        if floor_rps is not None:
            result |= {"paired_floor": floor, "paired_floor_rps": floor_rps}
        cell.rounds.append(result)
    return dict(run.cell_summary(cell))


def test_x_floor_is_the_median_of_the_per_round_ratios(run: Any) -> None:
    cells = [
        _cell(run, "floor/sync", "call-2026", [(2000, None), (2400, None), (3000, None)]),
        # The machine drifts: round 3 runs everything a third faster. Each ratio is taken
        # within its round (0.9, 0.8, 0.85), so the drift cancels.
        _cell(run, "flask-mcp/sync/sqlite", "call-2026", [(1800, 2000), (1600, 2000), (2550, 3000)]),
    ]
    run.ratios(cells)
    ours = cells[1]
    assert ours["paired_ratio_median"] == pytest.approx(0.85)
    assert (ours["paired_ratio_min"], ours["paired_ratio_max"]) == (pytest.approx(0.8), pytest.approx(0.9))
    assert ours["ratios"]["floor"] == pytest.approx(0.85)
    # The plain ratio of medians would have read 1800 / 2400 = 0.75.
    assert ours["rps_median"] / cells[0]["rps_median"] == pytest.approx(0.75)


def test_sdk_multiples_are_taken_through_the_floors(run: Any) -> None:
    cells = [
        _cell(run, "floor/sync", "call-2026", [(2000, None)]),
        _cell(run, "floor/gthread", "call-2026", [(3000, None)]),
        _cell(run, "flask-mcp/sync/sqlite", "call-2026", [(1700, 2000)]),  # 0.85 of its floor
        _cell(run, "flask-mcp/gthread/sqlite", "call-2026", [(2400, 3000)], floor="floor/gthread"),  # 0.8
        # The SDK was measured while the machine ran 10 % slower: 1350 against a floor of 1800.
        _cell(run, "sdk/stateless-json", "call-2026", [(1350, 1800)]),  # 0.75 of its floor
    ]
    run.ratios(cells)
    by_server = {cell["server"]: cell["ratios"] for cell in cells}
    # flask-mcp: 0.85 x 2000 = 1700; the SDK: 0.75 x 2000 = 1500 (not the 1350 it was measured at).
    assert by_server["flask-mcp/sync/sqlite"]["sdk-2026"] == pytest.approx(1700 / 1500)
    # The gthread row through its own floor: 0.8 x 3000 = 2400.
    assert by_server["flask-mcp/gthread/sqlite"]["sdk-2026"] == pytest.approx(2400 / 1500)
    assert by_server["flask-mcp/gthread/sqlite"]["floor"] == pytest.approx(0.8)
    assert by_server["sdk/stateless-json"]["sdk-2026"] == pytest.approx(1.0)


def test_cells_from_before_the_pairs_fall_back_to_plain_medians(run: Any) -> None:
    cells = [
        _cell(run, "floor/sync", "call-2026", [(2000, None)]),
        _cell(run, "flask-mcp/sync/sqlite", "call-2026", [(1600, None)]),
    ]
    run.ratios(cells)
    assert "paired_ratio_median" not in cells[1]
    assert cells[1]["ratios"]["floor"] == pytest.approx(0.8)


def test_which_servers_a_run_starts(run: Any) -> None:
    def keys(servers: str | None, no_gthread: bool = False) -> set[str]:
        return {spec.key for spec in run.chosen_servers(servers, no_gthread)}

    everything = keys(None)
    assert {"floor/sync", "floor/gthread", "flask-mcp/sync/sqlite", "sdk/stateful"} <= everything
    assert "flask-mcp/sync/memory" not in everything  # only when named in full
    assert "flask-mcp/sync/memory" not in keys("flask-mcp")
    assert keys("flask-mcp/sync/memory", no_gthread=True) == {"floor/sync", "flask-mcp/sync/memory"}
    assert "floor+insert/sync" not in everything  # the initialize ceiling: also only when named
    assert keys("floor+insert/sync", no_gthread=True) == {"floor/sync", "floor+insert/sync"}
    assert "floor+set/sync" not in everything  # its Redis counterpart, likewise
    assert keys("floor+set/sync", no_gthread=True) == {"floor/sync", "floor+set/sync"}
    assert "floor+rawset/sync" not in everything  # the same write on a plain socket, likewise
    assert keys("floor+rawset/sync", no_gthread=True) == {"floor/sync", "floor+rawset/sync"}
    assert "flask-mcp/gthread/redis" not in everything
    assert keys("flask-mcp/gthread/redis") == {"floor/sync", "floor/gthread", "flask-mcp/gthread/redis"}
    assert keys("sdk", no_gthread=True) == {"floor/sync", "sdk/stateless-json", "sdk/stateful"}
    assert not any("gthread" in key for key in keys(None, no_gthread=True))


def test_the_redis_rows_use_only_a_loopback_redis(run: Any) -> None:
    assert run.parse_args(["--redis-url", "redis://127.0.0.2:6390"]).redis_url == "redis://127.0.0.2:6390"
    with pytest.raises(SystemExit):
        run.parse_args(["--redis-url", "redis://10.0.0.1:6379"])


def test_gthread_servers_run_as_the_production_setting(run: Any, tmp_path: Path) -> None:
    one = next(s for s in run.SERVERS if s.key == "flask-mcp/gthread/sqlite")
    cmd = run.server_command(one, 8000, tmp_path / "log")
    assert cmd[:3] == ["taskset", "-c", run.SERVER_CORE]
    assert _option(cmd, "-w") == "1" and _option(cmd, "-k") == "gthread"
    assert (_option(cmd, "--threads"), _option(cmd, "--keep-alive")) == ("4", "5")
    assert one.client_cores == run.CLIENT_CORE  # wrk on the other core
    two = next(s for s in run.SERVERS if s.key == "flask-mcp/gthread-w2/sqlite")
    cmd = run.server_command(two, 8000, tmp_path / "log", threads=8, keepalive=2)
    assert cmd[:3] == ["taskset", "-c", "0,1"] and _option(cmd, "-w") == "2"
    assert (_option(cmd, "--threads"), _option(cmd, "--keep-alive")) == ("8", "2")
    assert two.client_cores == "0,1"  # two workers take both cores: wrk shares them
    sync = run.server_command(next(s for s in run.SERVERS if s.key == "floor/sync"), 8000, tmp_path / "log")
    assert "--threads" not in sync and "--keep-alive" not in sync
    args = run.parse_args([])
    assert (args.conns, args.threads, args.keepalive) == ([1, 8, 64, 256], 4, 5)


def _option(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_two_workers_are_paired_with_the_floor_of_two_workers(run: Any) -> None:
    gthread = _Running(_spec(run, "floor/gthread", role="floor", worker_class="gthread"))
    two = _Running(_spec(run, "floor/gthread-w2", role="floor", worker_class="gthread", workers=2))
    sync = _Running(_spec(run, "floor/sync", role="floor"))
    floors = {"sync": sync, "gthread": gthread, "gthread-w2": two}
    assert run.pair_floor(_spec(run, "flask-mcp/gthread-w2/sqlite", worker_class="gthread", workers=2), floors) is two
    assert run.pair_floor(_spec(run, "flask-mcp/gthread/sqlite", worker_class="gthread"), floors) is gthread
    assert {spec.key for spec in run.chosen_servers("gthread-w2", False)} == {
        "floor/sync", "floor/gthread-w2", "flask-mcp/gthread-w2/sqlite"}
    # A floor runs only beside a server of its layout (the sync one always).
    assert "floor/gthread-w2" not in {spec.key for spec in run.chosen_servers("flask-mcp/gthread/sqlite", False)}


def test_the_floors_p99_is_kept_beside_its_rate(run: Any) -> None:
    floor = [_slice(1000, 2000), _slice(1200, 1000), _slice(800, 4000)]
    figures = run.paired_floor_figures("floor/gthread", floor)
    assert figures["paired_floor"] == "floor/gthread"
    assert figures["paired_floor_rps"] == pytest.approx(1000.0)  # 3000 requests in 3 s
    assert figures["paired_floor_p99_us"] == 6000  # the median slice's p99 (3 x 2000)
    cell = run.Cell("flask-mcp/gthread/sqlite", "call-2026", 64)
    for number, (rps, p99, floor_p99) in enumerate([(900, 9000, 6000), (950, 12000, 6000), (800, 6000, 6000)], 1):
        cell.rounds.append(_slice(rps, 1000) | {"rps": rps, "rss_kb": 1, "round": number, "p99_us": p99,
                                                 "paired_floor": "floor/gthread", "paired_floor_rps": 1000.0,
                                                 "paired_floor_p99_us": floor_p99})
    summary = run.cell_summary(cell)
    assert summary["paired_p99_ratio_median"] == pytest.approx(1.5)  # of 1.5, 2.0, 1.0
    assert summary["paired_p99_ratio_max"] == pytest.approx(2.0)
    assert summary["paired_ratio_median"] == pytest.approx(0.9)


def test_the_ratio_table_has_a_column_per_connection_count(run: Any) -> None:
    cells = []
    for conns, ratio in ((8, 0.92), (64, 0.8)):
        cell = run.Cell("flask-mcp/gthread/sqlite", "call-2026", conns)
        cell.rounds.append(_slice(int(1000 * ratio), 1000) | {
            "rps": 1000 * ratio, "rss_kb": 1, "round": 1, "paired_floor": "floor/gthread",
            "paired_floor_rps": 1000.0, "paired_floor_p99_us": 2000})
        cells.append(dict(run.cell_summary(cell)))
    floor = run.Cell("floor/gthread", "call-2026", 8)
    floor.rounds.append(_slice(1000, 1000) | {"rps": 1000.0, "rss_kb": 1, "round": 1})
    cells.append(dict(run.cell_summary(floor)))
    run.ratios(cells)
    table = run.render_ratio_table(cells).splitlines()
    assert table[0] == "| server | workload | x floor c=8 | p99/floor c=8 | x floor c=64 | p99/floor c=64 |"
    assert len(table) == 3  # the header, its rule, one row: the floor has none of its own
    assert table[2] == "| flask-mcp/gthread/sqlite | call-2026 | 0.92 | 1.50 | 0.80 | 1.50 |"


def test_core_ticks_add_up_over_the_cores_named(run: Any) -> None:
    zero, one = run.core_ticks("0"), run.core_ticks("1")  # ("1" reads as none on a machine of one core)
    both = run.core_ticks("0,1")  # read a moment later: never less, and at most a few ticks more
    assert zero[0] + one[0] <= both[0] <= zero[0] + one[0] + 100
