"""The idempotency reply store (``replay``/``remember`` in lua/_replies.lua): a reply comes
back exactly as stored, costs at most about 120 bytes of Redis memory, answers a repeat
for at least ``REPLY_TTL_SECONDS`` and is gone by twice that; and every retry a client or
redis-py makes of one call comes within that time. Real redis-server, nothing mocked."""

from __future__ import annotations

import json
import time

import pytest
from client_bad_server import KEY_X
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from seatlease.seats import engine as engine_module
from seatlease.seats import redisconn
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.protocol.calls import REPLY_TTL_SECONDS
from seatlease.seats.scripts import helpers_source
from seatlease_client import BackendUnavailable, SeatClient

ROUND_TRIP = """
local slot = reply_slot(KEYS[1], KEYS[2], ARGV[1])
remember(slot, ARGV[2], now_ms(), cjson.decode(ARGV[3]))
return cjson.encode(replay(slot))
"""


@pytest.fixture
def round_trip(redis_client):
    lib = helpers_source()
    return redis_client.register_script(lib + ROUND_TRIP)


IDENTIFIER = st.text("abcXYZ019._:@-", min_size=1, max_size=40)
NUMBER = st.one_of(
    st.integers(-(2**40), 2**40),
    st.integers(1_700_000_000_000, 1_900_000_000_000),  # times in ms
    st.sampled_from([0, 1, 2, 360_000]),
)
ODD_TEXT = st.text(" ~^@'\"[{é", min_size=1, max_size=5)  # kept as JSON


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    status=st.sampled_from(["acquired", "renewed", "denied", "ok", "gone", "queued", "x"]),
    elements=st.lists(st.one_of(NUMBER, IDENTIFIER, ODD_TEXT), max_size=9),
)
def test_a_reply_comes_back_exactly_as_stored(round_trip, status, elements) -> None:
    reply = [status, *elements]
    field = f"f{abs(hash(json.dumps(reply))) % 10**9}"
    got = round_trip(keys=["h0", "h1"], args=[field, 60_000, json.dumps(reply)])
    assert json.loads(got) == reply


# The common replies' own packers (pack_reply picks one by the reply's status and length)
# against the element-by-element one, pack_any: the same text byte for byte, so a reply
# stored before or after a deploy reads back the same (unpack_reply), and the text comes
# back as the reply (returned as Redis values: integers stay exact).
PACK_BOTH = """
local reply = cjson.decode(ARGV[1])
local text = pack_reply(reply)
local status, own = reply[1], nil
if status == 'acquired' or status == 'renewed' then
  own = pack_lease_reply(status == 'acquired' and 'A' or 'R', reply)
elseif status == 'ok' then
  own = pack_ok_reply(reply)
elseif status == 'released' or status == 'gone' then
  own = pack_release_reply(status == 'released' and 'L' or 'G', reply)
end
return {text, pack_any(reply), unpack_reply(text), own or false}
"""


@pytest.fixture
def pack_both(redis_client):
    lib = helpers_source()
    return redis_client.register_script(lib + PACK_BOTH)


EPOCH = 1_790_000_000_000  # _lib.lua's


def mostly(usual: st.SearchStrategy, odd: st.SearchStrategy) -> st.SearchStrategy:
    """``usual`` 19 times in 20: a reply's elements are each odd now and then."""
    return st.integers(0, 19).flatmap(lambda i: odd if i == 0 else usual)


SMALL = mostly(
    st.one_of(st.sampled_from([0, 1, 2, 5, 360_000, 10_000_000]), st.integers(0, 10**12 - 1)),
    st.one_of(
        st.integers(-3, -1),
        st.sampled_from([10**12, 2**53 - 1, 2**53]),
        st.integers(-10, 10**6).map(lambda x: x + 0.5),
    ),
)
TIME = mostly(
    st.integers(EPOCH, EPOCH + 10**11),
    st.one_of(st.integers(EPOCH - 10**9, EPOCH - 1), st.sampled_from([10**12, 2**53 - 1, 2**53])),
)
TEXT = mostly(st.text("abAB09_-", max_size=30), st.one_of(IDENTIFIER, ODD_TEXT))


@st.composite
def common_reply(draw) -> list:
    shape = draw(st.sampled_from(["acquired", "renewed", "ok", "released", "gone"]))
    if shape in ("acquired", "renewed"):
        sid, deadline, lease = draw(TEXT), draw(TIME), draw(SMALL)
        counts = [draw(st.one_of(st.just("same"), SMALL)) for _ in range(3)]
        prev, used_seats_limit = lease, []
        for value in counts:
            prev = prev if value == "same" else value
            used_seats_limit.append(prev)
        now = draw(mostly(st.one_of(st.just(deadline - lease), TIME), SMALL))
        borrowed = draw(st.one_of(st.sampled_from([0, 1]), SMALL))
        return [shape, sid, deadline, lease, *used_seats_limit, now, borrowed]
    if shape == "ok":
        deadline, lease = draw(TIME), draw(SMALL)
        now = draw(mostly(st.one_of(st.just(deadline - lease), TIME), SMALL))
        borrowed = draw(st.one_of(st.sampled_from([0, 1]), SMALL))
        return [shape, deadline, lease, now, borrowed, draw(TEXT)]
    used = draw(SMALL)
    seats = draw(st.one_of(st.just(used), SMALL))
    lingering = draw(st.one_of(st.sampled_from([0, 1]), st.just(seats), SMALL))
    return [shape, used, seats, lingering, draw(mostly(TIME, SMALL))]


NAMES = mostly(st.text("abz09._-,", max_size=40), ODD_TEXT)


@st.composite
def with_terms(draw, reply: list) -> list:
    """A lease or heartbeat reply of a license with terms: the tail terms_tail adds
    (expires, end, flags, entitlements, max_version); other replies as they are."""
    if reply[0] not in ("acquired", "renewed", "ok") or len(reply) not in (6, 9):
        return reply
    first = reply[2] if reply[0] == "ok" else reply[3]
    exp = draw(st.one_of(st.just(0), TIME, st.just(first)))
    fin = draw(st.one_of(st.just(exp), TIME, st.just(0)))
    flags = draw(st.one_of(st.integers(0, 3), SMALL))
    return [*reply, exp, fin, flags, draw(NAMES), draw(NAMES)]


@st.composite
def with_tag(draw, reply: list) -> list:
    """A lease or heartbeat reply ending in a tagged text: a warned idle lease's reclaim
    time ('i:<ms>'), a share group's sessions ('s:<n>'), after a weight now and then; or
    an odd text of that kind, which the generic packer keeps."""
    if reply[0] not in ("acquired", "renewed", "ok"):
        return reply
    if draw(st.booleans()):
        reply = [*reply, draw(st.integers(2, 1000))]
    tag = draw(
        mostly(
            st.one_of(TIME.map(lambda t: f"i:{t}"), st.integers(0, 10**6).map(lambda n: f"s:{n}")),
            st.sampled_from(["i:", "s:-1", "i:1 2", "s:x", "i:@1", "u:ann"]),
        )
    )
    return [*reply, tag]


@settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    reply=mostly(
        st.one_of(
            common_reply(),
            common_reply().flatmap(with_terms),
            common_reply().flatmap(with_terms).flatmap(with_tag),
        ),
        common_reply().map(lambda r: r[:-1]),
    )
)
def test_the_common_replies_pack_as_the_generic_packer_packs_them(pack_both, reply) -> None:
    text, generic, back, own = pack_both(args=[json.dumps(reply)])
    assert text == generic, reply
    event(f"{reply[0]}: {'own packer' if own is not None else 'generic packer'}")
    # (Redis truncates a float returned by a script; a reply kept as JSON has its numbers
    # in cjson's 14 digits, as before.)
    numbers = [v for v in reply if not isinstance(v, str)]
    if all(isinstance(v, int) and abs(v) < (2**53 if text[0] != "[" else 10**14) for v in numbers):
        assert back == reply


NOW = EPOCH + 5_000_000


@pytest.mark.parametrize(
    ("reply", "packed"),
    [
        (["acquired", "AbC-d_9xYz", NOW + 360_000, 360_000, 10001, 10_000_000, 10_000_000,
          NOW, 0], "A~AbC-d_9xYz@51c980 57e40 2711 989680\"' 0"),
        (["renewed", "AbC-d_9xYz", NOW + 100_000, 600_000, 3, 5, 6, NOW, 1],
         "R~AbC-d_9xYz@4dd1e0 927c0 3 5 6^-186a0 1"),
        (["ok", NOW + 360_000, 360_000, NOW, 0, "laptop-1"], "O@51c980 57e40' 0~laptop-1"),
        (["ok", NOW + 100_000, 600_000, NOW, 1, "laptop-1"], "O@4dd1e0 927c0^-186a0 1~laptop-1"),
        (["released", 4, 5, 0, NOW], "L 4 5 0@4c4b40"),
        (["gone", 5, 5, 0, NOW], 'G 5" 0@4c4b40'),
    ],
)  # fmt: skip
def test_the_common_replies_pack_as_before(pack_both, reply, packed) -> None:
    """The texts the generic packer made before the common replies had their own (taken
    from it): replies stored by the scripts before a deploy read the same after it."""
    text, generic, back, own = pack_both(args=[json.dumps(reply)])
    assert (own, text, generic, back) == (packed, packed, packed, reply)


def test_a_lease_reply_is_stored_in_about_half_its_json(redis_client) -> None:
    engine = SeatEngine(
        redis_client, lambda _tenant, _license: engine_module.LicenseConfig(seats=5)
    )
    engine.acquire(SeatRequest("acme", "cad", "laptop-1", request_id="r1"))
    keys = LicenseKeys.of("acme", "cad")
    (stored,) = [v for k in keys.replies for v in redis_client.hvals(k)]
    assert len(stored) <= 50, stored  # {'acquired', session id, deadline, ...}: 82 in JSON


def used_memory(redis_client) -> int:
    return int(redis_client.info("memory")["used_memory"])


def test_a_reply_costs_at_most_120_bytes_of_redis_memory(redis_client) -> None:
    """INFO memory, across 30,000 seat calls with fresh request ids on one busy license
    (its reply hash a hash table, the costly case; small licenses' stay listpacks)."""
    engine = SeatEngine(
        redis_client, lambda _tenant, _license: engine_module.LicenseConfig(seats=1000)
    )
    lease = engine.acquire(SeatRequest("acme", "cad", "laptop-1"))
    before = used_memory(redis_client)
    for n in range(10_000):
        engine.acquire(SeatRequest("acme", "cad", "laptop-1"))
        engine.heartbeat("acme", "cad", lease.session_id)
        engine.release("acme", "cad", f"unknown-{n}")
    per_reply = (used_memory(redis_client) - before) / 30_000
    print(f"bytes per reply: {per_reply:.1f}")
    assert per_reply <= 120, per_reply


def test_a_reply_answers_a_repeat_for_its_ttl_and_is_gone_by_twice_it(
    redis_client, monkeypatch
) -> None:
    from seatlease.seats.protocol import calls

    monkeypatch.setattr(calls, "_REPLY_TTL_MS", 1000)  # (each script's ARGV: protocol/calls.py)
    engine = SeatEngine(
        redis_client, lambda _tenant, _license: engine_module.LicenseConfig(seats=5)
    )
    first = engine.acquire(SeatRequest("acme", "cad", "laptop-1", request_id="r1"))
    assert first.created
    time.sleep(0.9)
    assert engine.acquire(SeatRequest("acme", "cad", "laptop-1", request_id="r1")) == first
    time.sleep(1.2)  # past 2 x TTL: the first run's answer is gone, this is a new call
    again = engine.acquire(SeatRequest("acme", "cad", "laptop-1", request_id="r1"))
    assert not again.created and again.session_id == first.session_id
    keys = LicenseKeys.of("acme", "cad")
    assert sum(redis_client.hlen(k) for k in keys.replies) == 1  # the new answer alone


def redis_py_horizon() -> float:
    """How long after a seat call reaches the function its script may still run:
    redis-py's tries of it, each up to the connect and socket timeouts, with the
    backoff's largest pause between tries (the runtime's own settings)."""
    client = redisconn.connect("redis://127.0.0.1:1/0")  # settings only: never connects
    pool_kwargs = client.connection_pool.connection_kwargs
    retry = pool_kwargs["retry"]
    tries = retry._retries + 1
    per_try = pool_kwargs["socket_connect_timeout"] + pool_kwargs["socket_timeout"]
    return tries * per_try + retry._retries * retry._backoff._cap


def client_retry_window(client: SeatClient, longest_retry_after: float) -> float:
    """From a call's first attempt to its last (all with the same request_id): every
    attempt but the last timing out, and the longest pause before each retry (the
    doubling backoff, or the server's Retry-After when longer: seatlease_client._call)."""
    pauses = sum(
        max(min(client.max_backoff, client.backoff * 2**attempt), longest_retry_after)
        for attempt in range(client.retries)
    )
    return client.retries * client.timeout + pauses


def test_every_retry_of_a_call_comes_within_the_reply_ttl() -> None:
    """The server's Retry-After on what the client retries (503, 429) is at most 2 s
    (errors.BackendUnavailable, and a rate limit's wait of at most one interval)."""
    client = SeatClient(
        "http://127.0.0.1:1", "sl_00000000_x", handle_sigterm=False, pinned_keys=[KEY_X]
    )
    window = client_retry_window(client, longest_retry_after=2)
    assert window + redis_py_horizon() <= REPLY_TTL_SECONDS, (window, redis_py_horizon())


def test_the_computed_window_bounds_the_clients_real_retries() -> None:
    """The window above is what the client really does: against a server that never
    answers, a small client's attempts all end within it."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    port = listener.getsockname()[1]
    client = SeatClient(
        f"http://127.0.0.1:{port}",
        "sl_00000000_x",
        timeout=0.3,
        pinned_keys=[KEY_X],
        retries=3,
        backoff=0.1,
        max_backoff=0.3,
        handle_sigterm=False,
    )
    started = time.monotonic()
    with pytest.raises(BackendUnavailable):
        client.heartbeat("cad", "s1")
    elapsed = time.monotonic() - started
    listener.close()
    # The window ends at the last attempt's send; that attempt then waits its timeout.
    assert elapsed <= client_retry_window(client, longest_retry_after=0) + client.timeout + 0.5
    assert elapsed >= 4 * 0.3  # every attempt waited for its timeout: it did retry
