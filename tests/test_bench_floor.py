"""bench/redis_cost.py's floor rows run the Redis commands of a seat call alone, with
ready-made arguments: a new lease's (``NEW_LEASE_COMMANDS``), a heartbeat's
(``HEARTBEAT_COMMANDS``) and a release's (``RELEASE_COMMANDS``). Each list must be what
acquire.lua, heartbeat.lua and release.lua really run, or the floor would measure
something else. Both are counted in ``INFO commandstats`` (Redis counts the commands a
script calls) on a private redis-server; also: heartbeat and release read the server's
clock once."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from seatlease.seats.engine import SeatEngine
from seatlease.seats.ids import new_request_id
from seatlease.seats.protocol.calls import acquire_call, heartbeat_call, release_call
from seatlease.seats.protocol.replies import decode

BENCH = Path(__file__).resolve().parent.parent / "bench" / "redis_cost.py"
NOT_SCRIPTS = ("evalsha", "eval", "fcall", "function", "config", "info", "script")


def load_bench(path: Path, name: str) -> Any:
    """A bench script as a module, run as ``python3 bench/<script>.py`` runs it: with
    bench/ on the path (fcall_ab imports redis_cost)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_bench(BENCH, "bench_redis_cost")


def commands_run(client: Any, run: Callable[[], Any]) -> tuple[Any, Counter[str]]:
    """``run()``'s result and the commands its script ran, by name (lower case)."""
    client.config_resetstat()
    result = run()
    stats = client.info("commandstats")
    ran = Counter(
        {
            name.removeprefix("cmdstat_"): int(stat["calls"])
            for name, stat in stats.items()
            if name.removeprefix("cmdstat_").split("|")[0] not in NOT_SCRIPTS
        }
    )
    return result, ran


@pytest.fixture
def engine(redis_client, bench) -> SeatEngine:
    eng = SeatEngine(redis_client, bench.load_config)
    eng.scripts.library.load()  # the bench queues its calls in pipelines, as here
    eng.cache_config(bench.TENANT, bench.FLOOR, bench.load_config(bench.TENANT, bench.FLOOR))
    return eng


def new_lease(eng: SeatEngine, bench: Any, client_id: str, rate_limit: int = 0) -> Any:
    key_list, args = acquire_call(
        bench.TENANT,
        bench.FLOOR,
        client_id,
        metadata_json=bench.META,
        request_id=new_request_id(),
        rate_limit=rate_limit,
    )
    return eng.scripts.acquire(keys=key_list, args=args)


def test_the_floor_runs_the_commands_of_a_new_lease(redis_client, engine, bench) -> None:
    expected = Counter(command.lower() for command, *_args in bench.NEW_LEASE_COMMANDS)
    # (the license's first lease notes its length, as one lease in half an hour does:
    # lua/_lib.lua's note_lease_length; the floor is every other new lease's)
    new_lease(engine, bench, "first")
    for n in range(3):  # a new lease, then with more leases and replies
        reply, ran = commands_run(redis_client, lambda n=n: new_lease(engine, bench, f"c{n}"))
        assert reply[0] == "acquired"
        assert ran == expected, n
    floor = redis_client.register_script(bench.floor_script())
    key_list, args = bench.floor_call(bench.FLOOR, "c9", "s9", "f9", int(time.time() * 1000))
    reply, ran = commands_run(redis_client, lambda: floor(keys=key_list, args=args))
    assert reply == 1
    assert ran == expected
    # and it did a new lease's writes: the lease, its record, the client's entry
    assert redis_client.zcard(key_list[1]) == 5
    assert redis_client.hget(key_list[3], "c9") == "s9"


def test_the_heartbeat_floor_runs_the_commands_of_a_heartbeat(redis_client, engine, bench) -> None:
    expected = Counter(command.lower() for command, *_args in bench.HEARTBEAT_COMMANDS)
    sid = decode(new_lease(engine, bench, "hb")).session_id
    for n in range(3):  # a lease heartbeated again and again
        key_list, args = heartbeat_call(bench.TENANT, bench.FLOOR, sid, request_id=f"r{n}")
        reply, ran = commands_run(
            redis_client, lambda k=key_list, a=args: engine.scripts.heartbeat(keys=k, args=a)
        )
        assert reply[0] == "ok"
        assert ran == expected, n
    floor = redis_client.register_script(bench.floor_script(bench.HEARTBEAT_COMMANDS))
    now = int(time.time() * 1000)
    key_list, args = bench.heartbeat_floor_call(bench.FLOOR, sid, "f9", now)
    reply, ran = commands_run(redis_client, lambda: floor(keys=key_list, args=args))
    assert reply == 1
    assert ran == expected
    # and it did a heartbeat's writes: the lease's new deadline, in both indexes
    assert redis_client.zscore(key_list[1], sid) == int(args[2])
    assert redis_client.zscore(key_list[4], f"{bench.TENANT}/{bench.FLOOR}|{sid}") == int(args[2])


def test_the_release_floor_runs_the_commands_of_a_release(redis_client, engine, bench) -> None:
    expected = Counter(command.lower() for command, *_args in bench.RELEASE_COMMANDS)
    # (the license's first end gives its notes' key an expiry, as one end an hour does:
    # lua/_lib.lua's note_end; the floor is every other release's)
    engine.release(
        bench.TENANT, bench.FLOOR, decode(new_lease(engine, bench, "first-end")).session_id
    )
    for n in range(3):  # the license's last leases, one by one
        sid = decode(new_lease(engine, bench, f"rel{n}")).session_id
        key_list, args = release_call(bench.TENANT, bench.FLOOR, sid, request_id=f"r{n}")
        reply, ran = commands_run(
            redis_client, lambda k=key_list, a=args: engine.scripts.release(keys=k, args=a)
        )
        assert reply[0] == "released"
        assert ran == expected, n
    floor = redis_client.register_script(bench.floor_script(bench.RELEASE_COMMANDS))
    now = int(time.time() * 1000)
    new_lease(engine, bench, "c9")
    sid = redis_client.hget(key_list[3], "c9")
    deadline = int(redis_client.zscore(key_list[1], sid))
    key_list, args = bench.release_floor_call(bench.FLOOR, "c9", sid, "f9", now, deadline)
    reply, ran = commands_run(redis_client, lambda: floor(keys=key_list, args=args))
    assert reply == 1
    assert ran == expected
    # and it did a release's writes: the lease, its record and its client's entry gone
    assert redis_client.zscore(key_list[1], sid) is None
    assert redis_client.hget(key_list[2], sid) is None
    assert redis_client.hget(key_list[3], "c9") is None


def test_a_seat_call_reads_the_server_clock_once(redis_client, engine, bench) -> None:
    """One TIME per acquire, heartbeat and release, with a rate limit or without."""
    for rate in (0, 10**9):
        reply, ran = commands_run(
            redis_client, lambda r=rate: new_lease(engine, bench, f"c{r}", rate_limit=r)
        )
        assert reply[0] == "acquired" and ran["time"] == 1, ran
        sid = decode(reply).session_id
        for call in (engine.heartbeat, engine.release):
            _result, ran = commands_run(
                redis_client,
                lambda c=call, s=sid, r=rate: c(bench.TENANT, bench.FLOOR, s, rate_limit=r),
            )
            assert ran["time"] == 1, (call.__name__, ran)


def test_the_terms_row_takes_a_weighted_lease_and_gives_its_weight_back(
    redis_client, bench
) -> None:
    """The terms row (``TERMS_ROW``) measures a new lease of weight TERMS_WEIGHT on the
    license with terms: the lease counts its weight, carries the term, and adds
    TERMS_WEIGHT - 1 extra seats; the release between rounds (and the fill) leave the
    license's weights as they were, or the rounds would measure a growing ZSET."""
    eng = SeatEngine(redis_client, bench.load_config)
    eng.scripts.library.load()  # the bench queues its calls in pipelines, as here
    filled = bench.fill_license(eng, bench.TERMS, 3, "tfill")
    extra = bench.TERMS_WEIGHT - 1
    assert bench.extra_seats(eng) == 3 * extra
    pipe = redis_client.pipeline(transaction=False)
    sid = bench.queue_terms_acquire(eng, pipe, "trow")
    (reply,) = pipe.execute()
    answer = decode(reply)
    assert (answer.code, answer.session_id) == ("acquired", sid)
    assert answer.seats_used == 4 * bench.TERMS_WEIGHT  # four leases of the weight
    assert answer.entitlements == ",".join(bench.ENTITLEMENTS)  # the terms ...
    assert answer.weight == bench.TERMS_WEIGHT  # ... and the weight
    assert bench.extra_seats(eng) == 4 * extra
    pipe = redis_client.pipeline(transaction=False)
    for session in [sid, *filled.values()]:
        bench.queue_session(eng.scripts.release, pipe, bench.TERMS, session, True)
    assert [r[0] for r in pipe.execute()] == ["released"] * 4
    assert bench.extra_seats(eng) == 0


def test_the_heavy_rows_take_the_heaviest_lease_a_caller_may_ask_for(redis_client, bench) -> None:
    """The heavy rows measure calls on a lease of HEAVY_WEIGHT (the API's maximum) on a
    license that has room for them; their release gives every seat back."""
    from seatlease.api.schemas import MAX_LEASE_WEIGHT

    assert bench.HEAVY_WEIGHT == MAX_LEASE_WEIGHT
    eng = SeatEngine(redis_client, bench.load_config)
    eng.scripts.library.load()  # the bench queues its calls in pipelines, as here
    bench.fill_license(eng, bench.HEAVY, 2, "hfill")
    pipe = redis_client.pipeline(transaction=False)
    sid = bench.queue_acquire(eng, pipe, bench.HEAVY, "heavy-1", seats=bench.HEAVY_WEIGHT)
    (reply,) = pipe.execute()
    answer = decode(reply)
    assert (answer.code, answer.session_id, answer.weight) == ("acquired", sid, bench.HEAVY_WEIGHT)
    assert bench.extra_seats(eng, bench.HEAVY) == bench.HEAVY_WEIGHT - 1
    assert eng.heartbeat(bench.TENANT, bench.HEAVY, sid).seats == bench.HEAVY_WEIGHT
    assert eng.release(bench.TENANT, bench.HEAVY, sid).seats_used == 2
    assert bench.extra_seats(eng, bench.HEAVY) == 0


def test_the_function_library_runs_what_the_scripts_run(redis_client, engine, bench) -> None:
    """The seat library's functions (FCALL, as the engine calls them) and the same scripts
    by EVALSHA (bench/fcall_ab.py's other side) run the same commands with the same kind of
    answer, or that bench would compare two different things: a lease taken,
    heartbeated and released each way."""
    fcall_ab = load_bench(BENCH.parent / "fcall_ab.py", "bench_fcall_ab")
    library = engine.scripts.library
    ways = {"fcall": engine.scripts.__dict__, "evalsha": fcall_ab.by_evalsha(library)}
    ran: dict[str, list[Counter[str]]] = {}
    # (the license's first lease and end note what one an hour does: both ways alike after)
    engine.release(bench.TENANT, bench.FLOOR, decode(new_lease(engine, bench, "first")).session_id)
    for via, scripts in ways.items():
        key_list, args = acquire_call(
            bench.TENANT, bench.FLOOR, f"by-{via}", metadata_json=bench.META,
            request_id=new_request_id(),
        )  # fmt: skip
        took, acquired = commands_run(
            redis_client, lambda k=key_list, a=args, s=scripts: s["acquire"](keys=k, args=a)
        )
        assert took[0] == "acquired"
        sid = decode(took).session_id
        assert redis_client.hget(key_list[3], f"by-{via}") == sid
        key_list, args = heartbeat_call(bench.TENANT, bench.FLOOR, sid, request_id=new_request_id())
        beat, beaten = commands_run(
            redis_client, lambda k=key_list, a=args, s=scripts: s["heartbeat"](keys=k, args=a)
        )
        assert beat[0] == "ok"
        assert beaten == Counter(command.lower() for command, *_args in bench.HEARTBEAT_COMMANDS)
        key_list, args = release_call(bench.TENANT, bench.FLOOR, sid, request_id=new_request_id())
        end, released = commands_run(
            redis_client, lambda k=key_list, a=args, s=scripts: s["release"](keys=k, args=a)
        )
        assert end[0] == "released"
        assert redis_client.hget(key_list[3], f"by-{via}") is None
        way = redis_client.info("commandstats")[f"cmdstat_{via}"]  # (a NOSCRIPT fails once)
        assert way["calls"] - way["failed_calls"] == 1
        ran[via] = [acquired, beaten, released]
    assert ran["fcall"] == ran["evalsha"]
