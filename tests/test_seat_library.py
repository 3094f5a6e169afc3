"""The seat library (seats/scripts.py): acquire, heartbeat and release are the functions of
one Redis function library, called by FCALL, on real redis-servers. The library comes back
by itself wherever a server lost it, each call starts its own state, two releases' code
live side by side, and a server without functions is served by EVALSHA of the same
scripts."""

from __future__ import annotations

import json

import pytest
from redis.exceptions import OutOfMemoryError

from seatlease.errors import UserDenied
from seatlease.seats import redisconn
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.keys import SHARDS, LicenseKeys, shard_prefix
from seatlease.seats.scripts import LIBRARY_SCRIPTS, library_code, library_function
from seatlease_cli.procs import start_redis

T = "t"


def outbox_events(client) -> list[dict]:
    events = []
    for shard in range(SHARDS):
        for _id, fields in client.xrange(f"{shard_prefix(shard)}:outbox"):
            events.append(json.loads(fields["e"]))
    return events


def pairs(flat: list) -> dict:
    """A RESP2 map (a flat list of names and values) as a dict."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def functions_of(client) -> dict[str, list[str]]:
    """FUNCTION LIST: each library's name and its functions' names."""
    libraries = [pairs(lib) for lib in client.function_list()]
    return {
        lib["library_name"]: sorted(pairs(f)["name"] for f in lib["functions"]) for lib in libraries
    }


def test_the_seat_calls_run_as_the_librarys_functions(engine, configs, redis_client) -> None:
    """The first call loads the library (one FUNCTION LOAD) and every call is one FCALL."""
    redis_client.function_flush()
    configs.add(T, "lib", seats=2)
    redis_client.config_resetstat()
    lease = engine.acquire(SeatRequest(T, "lib", "c1"))
    engine.heartbeat(T, "lib", lease.session_id)
    engine.release(T, "lib", lease.session_id)
    stats = redis_client.info("commandstats")
    assert stats["cmdstat_function|load"]["calls"] == 1
    fcall = stats["cmdstat_fcall"]
    # the first FCALL found no function; acquire's first answer asked for the config
    assert fcall["failed_calls"] == 1
    assert fcall["calls"] - fcall["failed_calls"] == 4  # acquire twice, heartbeat, release
    name = library_code()[0]
    assert functions_of(redis_client) == {
        name: sorted(library_function(s) for s in LIBRARY_SCRIPTS)
    }


def test_a_server_that_lost_the_library_is_given_it_again(engine, configs, redis_client) -> None:
    """A restarted server without persistence, or a new shard, has no library: the call
    that finds none loads it and is made once (one lease, one event)."""
    configs.add(T, "lost", seats=2)
    engine.acquire(SeatRequest(T, "lost", "c1"))
    redis_client.function_flush()
    before = len(outbox_events(redis_client))
    lease = engine.acquire(SeatRequest(T, "lost", "c2"))
    assert lease.created
    assert redis_client.zcard(LicenseKeys.of(T, "lost").leases) == 2
    assert len(outbox_events(redis_client)) == before + 1
    redis_client.function_flush()
    assert engine.heartbeat(T, "lost", lease.session_id)
    redis_client.function_flush()
    assert engine.release(T, "lost", lease.session_id).seats_used == 1


def test_each_call_numbers_its_own_events_from_one(engine, configs, redis_client) -> None:
    """The library's top level runs once, at FUNCTION LOAD: a call's event count must still
    start at 1 (begin_call), or ids would depend on the calls before."""
    configs.add(T, "seq", seats=3)
    for client_id in ("c1", "c2", "c3"):
        engine.acquire(SeatRequest(T, "seq", client_id))
    ids = [e["event_id"] for e in outbox_events(redis_client) if e["license_id"] == "seq"]
    assert len(ids) == 3
    assert [i.rsplit("-", 1)[1] for i in ids] == ["1", "1", "1"]
    assert len({i.rsplit("-", 1)[0] for i in ids}) == 3


def test_a_policy_call_after_another_reads_its_own_users(engine, configs, redis_client) -> None:
    """The policy's helpers stay defined between calls in the library; what they learnt of
    a user in one call (user_facts) must not answer the next: a user denied after a
    first grant is refused."""
    from seatlease.seats.policy import LicensePolicy

    configs.add(T, "pol", seats=5, policy=LicensePolicy(max_per_user=5).redis_form())
    assert engine.acquire(SeatRequest(T, "pol", "c1", user="ann")).created
    configs.add(
        T, "pol", seats=5, policy=LicensePolicy(max_per_user=5, deny_users=["ann"]).redis_form()
    )
    engine.cache_config(T, "pol", configs(T, "pol"))
    with pytest.raises(UserDenied):
        engine.acquire(SeatRequest(T, "pol", "c2", user="ann"))
    assert engine.acquire(SeatRequest(T, "pol", "c3", user="bob")).created


def test_two_releases_libraries_live_side_by_side(engine, configs, redis_client) -> None:
    """During a rollout the old release's instances call their library while the new one's
    call theirs: another release's library (other code, so another name) loads beside
    this one, and both answer."""
    configs.add(T, "two", seats=3)
    engine.acquire(SeatRequest(T, "two", "c1"))
    name, code = library_code()
    other = "seatlease_0000000000000000"
    redis_client.function_load(code.replace(name, other))
    assert set(functions_of(redis_client)) >= {name, other}
    from seatlease.seats.ids import new_request_id
    from seatlease.seats.protocol.calls import acquire_call

    ks, av = acquire_call(T, "two", "c2", request_id=new_request_id())
    assert redis_client.fcall(f"{other}_acquire", len(ks), *ks, *av)[0] == "acquired"
    assert engine.acquire(SeatRequest(T, "two", "c3")).created
    redis_client.function_delete(other)


def test_a_library_function_errs_like_a_script(engine, configs, redis_client) -> None:
    """A call's own error (here: keys of another slot's shape cannot matter, so a wrong
    argument count) is raised, not taken for a missing function and retried."""
    from redis.exceptions import ResponseError

    configs.add(T, "err", seats=1)
    engine.acquire(SeatRequest(T, "err", "c1"))
    redis_client.config_resetstat()
    with pytest.raises(ResponseError):
        engine.scripts.acquire(keys=["only-one-key"], args=["x"])
    assert redis_client.info("commandstats")["cmdstat_fcall"]["calls"] == 1  # not retried
    assert "cmdstat_function|load" not in redis_client.info("commandstats")


@pytest.fixture(scope="module")
def server_without_functions():
    """A redis-server that has no FUNCTION or FCALL (Redis 6, or a provider's
    restriction): the engine must use EVALSHA of the same scripts."""
    handle = start_redis(None, False, "--rename-command", "FUNCTION", "", "--rename-command",
                         "FCALL", "")  # fmt: skip
    yield handle
    handle.stop()


def test_a_server_without_functions_is_served_by_evalsha(server_without_functions, configs):
    client = redisconn.connect(server_without_functions.url)
    try:
        eng = SeatEngine(client, configs)
        configs.add(T, "old", seats=1)
        lease = eng.acquire(SeatRequest(T, "old", "c1"))
        assert lease.created
        assert eng.heartbeat(T, "old", lease.session_id)
        assert eng.scripts.library.fallback
        stats = client.info("commandstats")
        assert stats["cmdstat_evalsha"]["calls"] >= 3
        assert eng.release(T, "old", lease.session_id).seats_used == 0
        pipe = client.pipeline(transaction=False)  # (a pipeline, as the benches queue)
        from seatlease.seats.ids import new_request_id
        from seatlease.seats.protocol.calls import acquire_call

        ks, av = acquire_call(T, "old", "c2", request_id=new_request_id())
        eng.scripts.acquire(keys=ks, args=av, client=pipe)
        assert pipe.execute()[0][0] == "acquired"
    finally:
        client.close()


def test_a_server_that_forbids_functions_is_served_by_evalsha(configs) -> None:
    """An ACL (or a provider) that answers NOPERM to FCALL and FUNCTION: the same fallback."""
    handle = start_redis()
    admin = redisconn.connect(handle.url)
    try:
        admin.acl_setuser(
            "seats",
            enabled=True,
            nopass=True,
            keys=["*"],
            commands=["+@all", "-fcall", "-function"],
        )
        client = redisconn.connect(handle.url, username="seats")
        eng = SeatEngine(client, configs)
        configs.add(T, "acl", seats=1)
        lease = eng.acquire(SeatRequest(T, "acl", "c1"))
        assert lease.created and eng.scripts.library.fallback
        assert eng.release(T, "acl", lease.session_id).seats_used == 0
        assert admin.info("commandstats")["cmdstat_evalsha"]["calls"] >= 2
        client.close()
    finally:
        admin.close()
        handle.stop()


def test_a_restarted_server_gets_the_library_and_the_lease_is_made_once(configs) -> None:
    """A real restart without persistence (the process killed and started again on the
    same port): the library is gone with the data; the first call loads it again."""
    handle = start_redis()
    client = redisconn.connect(handle.url)
    try:
        eng = SeatEngine(client, configs)
        configs.add(T, "restart", seats=2)
        assert eng.acquire(SeatRequest(T, "restart", "c1")).created
        handle.restart()
        assert functions_of(client) == {}  # (the reconnect: redis-py's retry)
        client.config_resetstat()
        lease = eng.acquire(SeatRequest(T, "restart", "c1"))
        assert lease.created  # (the data went with the restart: a new lease)
        stats = client.info("commandstats")
        assert stats["cmdstat_function|load"]["calls"] == 1
        assert client.zcard(LicenseKeys.of(T, "restart").leases) == 1
        assert [e["type"] for e in outbox_events(client)] == ["lease.acquired"]
    finally:
        client.close()
        handle.stop()


def test_each_cluster_shard_gets_the_library_when_it_lacks_it(redis_cluster, configs) -> None:
    """Redis Cluster: FUNCTION LOAD goes to every primary; a shard that lost the library
    (replaced, or added later) gets it on its first 'function not found', and the calls
    on its licenses go on."""
    client = redisconn.connect(redis_cluster.url)
    try:
        client.flushall()
        eng = SeatEngine(client, configs)
        licenses = [f"shard{n}" for n in range(12)]  # (licenses in every node's slots)
        for lic in licenses:
            configs.add(T, lic, seats=2)
            assert eng.acquire(SeatRequest(T, lic, "c1")).created
        nodes = client.get_primaries()
        assert len(nodes) == 3
        for node in nodes:
            assert library_code()[0] in functions_of(node.redis_connection)
        lost = nodes[0].redis_connection
        lost.function_flush()
        lost.config_resetstat()
        for lic in licenses:
            assert eng.acquire(SeatRequest(T, lic, "c2")).created
        fcall = lost.info("commandstats")["cmdstat_fcall"]
        assert fcall["failed_calls"] == 1  # that shard's one 'function not found'
        assert fcall["calls"] > fcall["failed_calls"]  # ... and its calls after it
        for node in nodes:
            assert library_code()[0] in functions_of(node.redis_connection)
    finally:
        client.close()


@pytest.mark.parametrize("library", ["loaded", "lost"])
def test_out_of_memory_a_release_frees_and_a_repeat_gets_its_answer(configs, library) -> None:
    """At maxmemory (noeviction) Redis refuses a function that may write before it runs,
    where a script without flags was refused only at its first write that could grow
    memory. The engine then runs the same script by EVALSHA, so what callers are told
    does not change: a release still frees its seat (docs/operations.md: the memory comes
    back through releases and the reaper), a repeated acquire still gets its stored
    answer, and a new lease or a heartbeat is refused (503) with nothing written. And so
    on a full server that lost the library (``lost``): it refuses the load too (FUNCTION
    LOAD is a write), and the call still goes by EVALSHA rather than failing."""
    handle = start_redis()
    client = redisconn.connect(handle.url)
    try:
        eng = SeatEngine(client, configs)
        configs.add(T, "oom", seats=5)
        first = eng.acquire(SeatRequest(T, "oom", "c1", request_id="first-call"))
        other = eng.acquire(SeatRequest(T, "oom", "c2"))
        leases = LicenseKeys.of(T, "oom").leases
        events = len(outbox_events(client))
        if library == "lost":
            client.function_flush()
        client.config_set("maxmemory", 1)
        try:
            again = eng.acquire(SeatRequest(T, "oom", "c1", request_id="first-call"))
            assert again == first  # the stored answer, word for word
            with pytest.raises(OutOfMemoryError):
                eng.acquire(SeatRequest(T, "oom", "c3"))
            with pytest.raises(OutOfMemoryError):
                eng.heartbeat(T, "oom", first.session_id)
            assert client.zcard(leases) == 2 and len(outbox_events(client)) == events
            released = eng.release(T, "oom", other.session_id)
            assert released.released and released.seats_used == 1
            assert client.zcard(leases) == 1
            assert [e["type"] for e in outbox_events(client)][-1] == "lease.released"
        finally:
            client.config_set("maxmemory", 0)
        assert eng.heartbeat(T, "oom", first.session_id)  # (FCALL again once there is room)
    finally:
        client.close()
        handle.stop()


@pytest.mark.parametrize("library", ["loaded", "lost"])
def test_on_a_read_only_replica_a_repeat_still_gets_its_answer(configs, library) -> None:
    """A failover's old primary turned replica refuses a function that may write before
    it runs, where a script ran until its first write: a repeated call read its stored
    answer there. The engine makes the call again by EVALSHA, so it still does, and a
    new lease is refused (ReadOnlyError: a 503) with nothing written. A replica without
    the library (``lost``: flushed on its primary) refuses to load it: EVALSHA too."""
    from redis.exceptions import ReadOnlyError

    primary, replica = start_redis(), start_redis()
    to_primary = redisconn.connect(primary.url)
    to_replica = redisconn.connect(replica.url)
    try:
        port = int(primary.url.rsplit(":", 1)[1].split("/")[0])
        to_replica.replicaof("127.0.0.1", port)
        configs.add(T, "ro", seats=5)
        first = SeatEngine(to_primary, configs).acquire(
            SeatRequest(T, "ro", "c1", request_id="first-call")
        )
        if library == "lost":
            to_primary.function_flush()
        assert to_primary.wait(1, 5000) == 1  # (the replica has it all)
        on_replica = SeatEngine(to_replica, configs)
        assert on_replica.acquire(SeatRequest(T, "ro", "c1", request_id="first-call")) == first
        with pytest.raises(ReadOnlyError):
            on_replica.acquire(SeatRequest(T, "ro", "c2"))
        assert to_replica.zcard(LicenseKeys.of(T, "ro").leases) == 1
    finally:
        to_primary.close()
        to_replica.close()
        replica.stop()
        primary.stop()


def test_a_server_still_without_the_library_after_a_load_answers_its_error(
    engine, configs, redis_client
) -> None:
    """The call is made again once after a load, not until the function appears: a load
    that leaves it missing (here: a load that does nothing) ends in Redis's own error."""
    from redis.exceptions import ResponseError

    configs.add(T, "gone", seats=1)
    engine.acquire(SeatRequest(T, "gone", "c1"))
    redis_client.function_flush()
    engine.scripts.library.load = lambda: True  # (this instance only: "loaded")
    redis_client.config_resetstat()
    with pytest.raises(ResponseError, match=r"(?i)function not found"):
        engine.acquire(SeatRequest(T, "gone", "c2"))
    assert redis_client.info("commandstats")["cmdstat_fcall"]["failed_calls"] == 2
