"""Redis-side cost of the seat scripts, as a ratio to a plain ZADD measured in the same run.

Starts a private redis-server (loopback, nothing on disk), fills it with ``--total`` live
leases (default 1,000,000): ``--hot`` (10,000) on one license, the rest 100 per license
spread over all 256 shards. Then, per phase, it reads the server's own time per call from
``INFO commandstats`` (``usec_per_call``) after ``CONFIG RESETSTAT``:

- ``zadd (baseline)``: a plain ZADD of a new member into a ZSET of ``--hot`` members (the
  size of the hot license's lease ZSET);
- ``acquire (new)``, ``heartbeat`` and ``release`` on the hot license (the three ops with a
  target), and three rows for information: ``acquire (renew)`` (the same client again),
  ``evalsha floor`` (a script that only returns 1: the fixed cost of any EVALSHA) and
  ``floor (commands)`` (the Redis commands of a new lease alone, ``NEW_LEASE_COMMANDS``,
  with ready-made arguments, on a license of its own: what acquire costs however its
  Lua is written), and the same for heartbeat and release, ``heartbeat floor (commands)``
  (``HEARTBEAT_COMMANDS``, on that license's leases) and ``release floor (commands)``
  (``RELEASE_COMMANDS``, ending the leases the round's acquire floor made); each seat op's
  server time over its floor's, same round, is reported against ``FLOOR_TARGET`` (1.5x);
- the license policy, each against ``acquire (new)`` of the same round (target at most
  1.3x): ``acquire (policy)``, a new lease on a license as large as the hot one with a
  full policy (at most 2 leases per user, each user holding one; two groups of 50 users
  with 10 reserved seats each; the queue on), and ``acquire (queued)``, a waiting client
  keeping its place (202) on a full license with 1,000 clients in line;
- a license's term and entitlements with a weighted lease, against ``acquire (new)`` of
  the same round (target at most 1.1x): ``acquire (terms+w4)``, a new lease of weight 4
  (``seats=4``: its three extra seats added to the license's ``wsum``) on a license with
  an end a year away, a 7-day grace, 8 entitlements and a max_version, holding as many
  leases as the hot one, each of weight 4; the acquire asks for two entitlements and its
  version (every check runs, and the answer carries the term and the weight). The rows'
  leases are released between rounds, which takes their weight with them (checked);
- the heaviest lease a caller may ask for, against the same call on a one-seat lease of
  the same round (target at most 1.5x: a weight must cost what a light lease costs, not
  O(weight)): ``heartbeat (w100k)``, ``acquire (renew w100k)`` and ``release (w100k)``,
  each on its own lease of 100,000 seats on a license as large as the hot one, against
  ``heartbeat``, ``acquire (renew)`` and ``release``;
- idle seats and shared seats (issue 50), each against the plain call of the same round:
  ``heartbeat (activity)``, a heartbeat saying the product's activity (``idle_seconds``
  below the timeout) on a license with an idle rule (when needed), as large as the hot
  one, and ``heartbeat (warned)``, one idle past the timeout on a lease warned before the
  rounds (it stays warned: its answer carries the reclaim time), both against
  ``heartbeat`` (target at most 1.1x: "heartbeats carrying activity stay within today's
  heartbeat cost"); ``acquire (shared)``, a new lease joining its user's seat on a license
  sharing by user (as large as the hot one, its leases in 1,000 users' groups), against
  ``acquire (new)``, and ``release (shared)``, the release of such a lease (its group
  keeps the seat), against ``release`` (target at most 1.3x, the policy's). They are also
  measured paired (``--pairs`` samples of 1,000 calls of each kind back to back, in
  rotating order): the targets apply to the ratio of the minima.

A round measures every phase once, ZADD first. The machine is shared and noisy, so
``--rounds`` rounds (default 5) run and the median of the per-round ratios is reported.
The ratio is server-side and per call (no network, no client):
``usec_per_call(fcall) / usec_per_call(zadd)`` (the seat calls are FCALLs of the seat
library, as the product makes them: seats/scripts.py; the floors are EVALSHA scripts);
target at most ``--target`` (3.0).

For information it then runs redis-benchmark (50 connections, no pipelining) for ZADD,
heartbeat and acquire (a new lease on a license without a policy, no rate limit), and the
same acquire for a tenant with a rate limit that never refuses (``acquire (rate)``: the
budget's check runs on every call), and ``floor (commands)``: throughput with network and
parsing included, the measure behind docs/design.md's "ZADD 81k/s, script 38k/s", and
acquire's against its target (at most 2.5x ZADD, ``THROUGHPUT_TARGET``) next to the
floor's. ``--throughput-only`` skips the loading and the rounds and runs this part alone.

The breakdown lists the Redis commands each script ran (Redis 7 counts commands called
from Lua in commandstats too), as calls and microseconds per op; the rest of the FCALL
time is spent in Lua and at the Lua/Redis boundary (argument and reply conversion,
command lookup and checks per ``redis.call``). ``--profile`` adds a step-by-step profile of
acquire.lua and heartbeat.lua: each script cut short before each top-level statement, the
cost of a step being the difference of consecutive cuts (minimum of several samples:
other processes' load only ever adds time); the cuts run as EVALSHA scripts, so their
first step also holds what defining the helpers costs, which the library pays at load.

Run: ``python3 bench/redis_cost.py [--profile]`` (3 to 6 minutes on 2 shared cores;
``--total 100000`` for a quick look). Bounded: loading stops at ``--max-seconds``. A
missed target is printed; the exit status is 2 for it only with ``--strict`` (so that
``make bench`` runs both benchmarks), 1 for an error.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

from seatlease.licenses import LicenseConfig
from seatlease.seats import keys
from seatlease.seats.engine import SeatEngine
from seatlease.seats.ids import new_request_id, new_session_id
from seatlease.seats.policy import LicensePolicy
from seatlease.seats.protocol.calls import acquire_call, heartbeat_call, release_call
from seatlease.seats.redisconn import connect
from seatlease.seats.scripts import PRELUDES, helpers_source, library_function, script_source
from seatlease_cli.procs import start_redis

# The command the seat calls are made with (seats/scripts.py: acquire, heartbeat and
# release are the seat library's functions); the floors stay EVALSHA scripts.
SEAT_CALL = "fcall"

TENANT = "bench"
HOT = "hot"
THROUGHPUT = "throughput"  # redis-benchmark's license (no policy)
TENANT_LIMITED = "benchrl"  # redis-benchmark's rate-limited tenant
FLOOR = "floor"  # the commands' floor row's license (never THROUGHPUT's keys)
FLOOR_ROW = "floor (commands)"  # its row: NEW_LEASE_COMMANDS alone
HEARTBEAT_FLOOR_ROW = "heartbeat floor (commands)"  # HEARTBEAT_COMMANDS alone
RELEASE_FLOOR_ROW = "release floor (commands)"  # RELEASE_COMMANDS alone
# Each seat op against its own commands' floor, same round: at most FLOOR_TARGET
FLOORS = {
    "acquire (new)": FLOOR_ROW,
    "heartbeat": HEARTBEAT_FLOOR_ROW,
    "release": RELEASE_FLOOR_ROW,
}
FLOOR_TARGET = 1.5
THROUGHPUT_TARGET = 2.5  # acquire (new) at most this many ZADDs' time (redis-benchmark)
NEVER_REFUSES = 10**9  # calls per second: the check runs, never refuses
ACQ_FIELD, HB_FIELD = 10, 6  # the reply field's index in acquire's and heartbeat's ARGV
PROFILED = "profiled"  # the profile's truncated scripts write here, never on HOT
PER_COLD_LICENSE = 100
LEASE_SECONDS = 3600  # nothing expires while the benchmark runs
SEATS = 10_000_000  # every acquire finds a free seat
PIPELINE = 200  # commands per round trip (the server-side cost does not depend on it)
META = json.dumps({"hostname": "ws-000000", "user": "bench"}, separators=(",", ":"))
LOAD_WORKERS = 2
LICENSES_PER_BATCH = 10  # 1,000 acquires per write while loading


# The license policy (docs/design.md, "License policy and the wait queue"): POLICY is like
# HOT with a full policy (a per-user limit, two reserved groups, a queue); QUEUED is full,
# with WAITING tickets in its queue.
POLICY = "policy"
QUEUED = "queued"
# A license with a term, entitlements and a version range (docs/design.md, "Terms, grace,
# entitlements and versions"), holding as many leases as HOT, each of weight TERMS_WEIGHT
# (docs/design.md, "Weighted seats"); its acquires ask for NEEDS, VERSION and TERMS_WEIGHT.
TERMS = "terms"
TERMS_WEIGHT = 4
TERMS_ROW = f"acquire (terms+w{TERMS_WEIGHT})"
ENTITLEMENTS = ("cloud", "design", "pro", "render", "render.gpu", "sim", "team", "viewer")
NEEDS = ("pro", "render")
VERSION = "2026.4"
TERMS_TARGET = 1.1
WAITING = 1_000
QUEUED_SEATS = 10
# The heaviest lease a caller may ask for (the API's maximum weight), on a license of its
# own as large as HOT: its heartbeat, renewal and release against a one-seat lease's.
HEAVY = "heavy"
HEAVY_WEIGHT = 100_000
HEAVY_SEATS = 10**12  # room for --ops leases of HEAVY_WEIGHT
HEAVY_TARGET = 1.5
HEAVY_ROWS = {  # the heavy row -> the one-seat row of the same call
    "heartbeat (w100k)": "heartbeat",
    "acquire (renew w100k)": "acquire (renew)",
    "release (w100k)": "release",
}
# Idle seats and shared seats (issue 50; docs/design.md, "Idle seats" and "Shared seats"):
# IDLE is like HOT with an idle rule (reclaimed when needed), SHARED like HOT sharing seats
# by user, its leases in SHARED_USERS groups (each user's sessions on one seat). Their rows
# against the plain call of the same round: a heartbeat saying the product's activity
# (idle less than the timeout), one idle past it whose warning was given before the rounds
# (it stays warned: the answer carries idle_reclaim_at, nothing more is written), an
# acquire joining a user's seat, and the release of such a lease (its group keeps the seat).
IDLE = "idle"
IDLE_TIMEOUT = 600  # seconds; a warned lease is reclaimed no earlier than LEASE_SECONDS/3
ACTIVE_IDLE_SECONDS = 30  # what the activity row's heartbeats say: below the timeout
WARNED_IDLE_SECONDS = 2 * IDLE_TIMEOUT  # what the warned row's say: past it
SHARED = "shared"
SHARED_USERS = 1_000
IDLE_SHARE_ROWS = {  # the row -> the plain row of the same call, same round
    "heartbeat (activity)": "heartbeat",
    "heartbeat (warned)": "heartbeat",
    "acquire (shared)": "acquire (new)",
    "release (shared)": "release",
}
# "Heartbeats carrying activity stay within today's heartbeat cost" (issue 50): at most
# IDLE_TARGET over the plain heartbeat of the same round (the rounds' noise on a call of
# ~15 us); the shared acquire and release against the plain ones: the policy's bar.
IDLE_TARGET = 1.1
SHARE_TARGET = 1.3


def full_policy(reserve: int, members: list[str]) -> LicensePolicy:
    """At most 2 leases per user, two groups of 50 users with ``reserve`` seats each (the
    first of ``members`` in design, the rest in render), the queue on."""
    half = len(members) // 2
    return LicensePolicy(
        max_per_user=2,
        groups={"design": members[:half] + [f"designer-{i}" for i in range(50 - half)],
                "render": members[half:] + [f"renderer-{i}" for i in range(50 - half)]},
        reserve={"design": reserve, "render": reserve},
        queue=True,
        queue_ticket_seconds=3600,  # no ticket runs out while the benchmark runs
        queue_max=10_000,  # WAITING clients in line on QUEUED_SEATS (default: 10 x seats)
    )  # fmt: skip


def user_of(client_id: str) -> str:
    """Each client of the policy licenses is its own user (with one live lease each)."""
    return f"user-{client_id.rsplit('-', 1)[-1]}"


POLICIES = {
    POLICY: full_policy(10, []).redis_form(),
    # QUEUED's first holders are the groups' members, so its seats fill up
    QUEUED: full_policy(2, [user_of(f"holder-{i:07d}") for i in range(4)]).redis_form(),
}


TERM_ENDS = datetime.now(UTC) + timedelta(days=365)


def load_config(_tenant: str, license_id: str) -> LicenseConfig:
    seats = {QUEUED: QUEUED_SEATS, HEAVY: HEAVY_SEATS}.get(license_id, SEATS)
    config = LicenseConfig(
        seats=seats,
        lease_seconds=LEASE_SECONDS,
        max_lease_seconds=LEASE_SECONDS,
        policy=POLICIES.get(license_id, ""),
    )
    if license_id == TERMS:
        config = replace(
            config,
            expires_at=TERM_ENDS,
            grace_seconds=7 * 86400,
            entitlements=ENTITLEMENTS,
            max_version="2026.10",
        )
    if license_id == IDLE:
        config = replace(config, idle_timeout_seconds=IDLE_TIMEOUT, idle_reclaim="when_needed")
    if license_id == SHARED:
        config = replace(config, share="user")
    return config


def new_engine(url: str) -> SeatEngine:
    """An engine whose seat library is loaded: the benches queue its calls in pipelines,
    where a missing function cannot be loaded and called again."""
    eng = SeatEngine(connect(url, socket_timeout=120), load_config)
    eng.scripts.library.load()
    return eng


# -- queueing seat calls in a pipeline, exactly as SeatEngine builds them ----------------


def queue_acquire(
    eng: SeatEngine,
    pipe: Any,
    license_id: str,
    client_id: str,
    sid: str | None = None,
    meta: str = META,
    **policy_fields: Any,
) -> str:
    """``policy_fields``: acquire_call's user, queue, ticket, entitlements, version,
    share_user."""
    sid = sid or new_session_id()
    key_list, args = acquire_call(
        TENANT, license_id, client_id, metadata_json=meta, request_id=new_request_id(),
        session_id=sid, **policy_fields,
    )  # fmt: skip
    eng.scripts.acquire(keys=key_list, args=args, client=pipe)
    return sid


def queue_terms_acquire(eng: SeatEngine, pipe: Any, client_id: str) -> str:
    """The terms row's call: a new lease of weight TERMS_WEIGHT on TERMS, asking for NEEDS
    and VERSION."""
    return queue_acquire(
        eng, pipe, TERMS, client_id, entitlements=NEEDS, version=VERSION, seats=TERMS_WEIGHT
    )


def sharer_of(client_id: str) -> str:
    """SHARED's user of a client: SHARED_USERS of them, each on many clients."""
    return f"sharer-{int(client_id.rsplit('-', 1)[-1]) % SHARED_USERS:04d}"


def queue_shared_acquire(eng: SeatEngine, pipe: Any, client_id: str) -> str:
    """A new lease on SHARED as the engine asks for it: its user (the metadata's) is the
    policy's user and the share key (its group has a live seat: the lease joins it)."""
    user = sharer_of(client_id)
    meta = json.dumps({"hostname": "ws-000000", "user": user}, separators=(",", ":"))
    return queue_acquire(eng, pipe, SHARED, client_id, meta=meta, user=user, share_user=user)


def queue_idle_heartbeat(eng: SeatEngine, pipe: Any, sid: str, idle_seconds: int) -> None:
    """A heartbeat on IDLE saying how long the product saw no activity (as a client that
    touches its lease sends: idle_seconds, not busy)."""
    key_list, args = heartbeat_call(
        TENANT, IDLE, sid, request_id=new_request_id(), idle_seconds=idle_seconds
    )
    eng.scripts.heartbeat(keys=key_list, args=args, client=pipe)


def shared_beyond_seats(eng: SeatEngine) -> int:
    """SHARED's sessions beyond their groups' seats (the users hash's "#ssum")."""
    return int(eng.redis.hget(keys.LicenseKeys.of(TENANT, SHARED).users, "#ssum") or 0)


def warn_idle(eng: SeatEngine, sessions: list[str]) -> None:
    """Each lease of ``sessions`` (IDLE's) warned: one heartbeat idle past the timeout
    (lease.idle), not measured."""
    run_batched(
        eng.redis,
        sessions,
        lambda p, sid: queue_idle_heartbeat(eng, p, sid, WARNED_IDLE_SECONDS),
        "ok",
    )
    warned = eng.redis.zcard(keys.LicenseKeys.of(TENANT, IDLE).idlers)
    if warned != len(sessions):
        raise RuntimeError(f"{IDLE}: {warned} leases warned of {len(sessions)}")


def extra_seats(eng: SeatEngine, license_id: str = TERMS) -> int:
    """The license's weighted leases' seats past their first (``wsum``): TERMS_WEIGHT - 1
    for each live lease of TERMS."""
    return int(eng.redis.get(keys.LicenseKeys.of(TENANT, license_id).wsum) or 0)


def queue_session(script: Any, pipe: Any, license_id: str, sid: str, release: bool) -> None:
    build = release_call if release else heartbeat_call
    key_list, args = build(TENANT, license_id, sid, request_id=new_request_id())
    script(keys=key_list, args=args, client=pipe)


def run_batched(
    client: Any, items: list[Any], queue: Callable[[Any, Any], Any], expect: str | None
) -> None:
    """``queue(pipe, item)`` for every item, PIPELINE per round trip; checks the replies."""
    for start in range(0, len(items), PIPELINE):
        pipe = client.pipeline(transaction=False)
        for item in items[start : start + PIPELINE]:
            queue(pipe, item)
        for reply in pipe.execute():
            status = reply[0] if isinstance(reply, list) else reply
            if expect is not None and status != expect:
                raise RuntimeError(f"unexpected reply {reply!r} (expected {expect!r})")


# -- loading the store -----------------------------------------------------------------


def fill_license(
    eng: SeatEngine,
    license_id: str,
    count: int,
    tag: str,
    numbered: bool = False,
    users: bool = False,
) -> dict[str, str]:
    """``count`` new leases on one license; returns client_id -> session_id. ``numbered``:
    session ids are 0-padded 12-digit numbers, as redis-benchmark's ``__rand_int__``.
    ``users``: each lease names its user (``user_of``), for the policy licenses. The
    terms license's leases are TERMS' own (``queue_terms_acquire``: weighted), the shared
    license's SHARED's (``queue_shared_acquire``: each user's sessions on one seat)."""
    eng.cache_config(TENANT, license_id, load_config(TENANT, license_id))
    sessions: dict[str, str] = {}

    def queue(pipe: Any, client_id: str) -> None:
        sid = f"{len(sessions):012d}" if numbered else None
        user = user_of(client_id) if users else None
        if license_id == TERMS:
            sessions[client_id] = queue_terms_acquire(eng, pipe, client_id)
        elif license_id == SHARED:
            sessions[client_id] = queue_shared_acquire(eng, pipe, client_id)
        else:
            sessions[client_id] = queue_acquire(eng, pipe, license_id, client_id, sid, user=user)

    run_batched(eng.redis, [f"{tag}-{i:07d}" for i in range(count)], queue, "acquired")
    return sessions


def fill_queue(eng: SeatEngine) -> list[str]:
    """QUEUED full (QUEUED_SEATS leases) with WAITING clients in line; their ids."""
    fill_license(eng, QUEUED, QUEUED_SEATS, "holder", users=True)
    waiting = [f"waiter-{i:07d}" for i in range(WAITING)]

    def join(pipe: Any, client_id: str) -> None:
        queue_acquire(eng, pipe, QUEUED, client_id, user=user_of(client_id), queue=True)

    run_batched(eng.redis, waiting, join, "queued")
    return waiting


def _resp(*args: str | bytes) -> bytes:
    """One command in the Redis protocol."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = arg if isinstance(arg, bytes) else arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(out)


def _load_worker(job: tuple[str, str, list[str], float, int]) -> int:
    """One loader process: PER_COLD_LICENSE leases on each of its licenses.

    The same EVALSHA of the registered acquire script that SeatEngine sends, written as
    raw protocol on one socket, PIPELINE_LOAD calls per write: redis-py's encoding and
    reply parsing would otherwise make the Python client, not Redis, the slow side of
    loading a million leases. Every reply is checked to be an 'acquired'."""
    url, sha, licenses, deadline, worker = job
    eng = new_engine(url)
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    sock = socket.create_connection((host, int(port)))
    marker = f"end-of-batch-{worker}".encode()
    loaded = 0
    for start in range(0, len(licenses), LICENSES_PER_BATCH):
        if time.monotonic() > deadline:
            break
        batch = licenses[start : start + LICENSES_PER_BATCH]
        commands = []
        for license_id in batch:
            eng.cache_config(TENANT, license_id, load_config(TENANT, license_id))
            for i in range(PER_COLD_LICENSE):
                key_list, args = acquire_call(
                    TENANT, license_id, f"c{i:03d}", metadata_json=META,
                    request_id=new_request_id(),
                )  # fmt: skip
                commands.append(
                    _resp("EVALSHA", sha, str(len(key_list)), *key_list, *map(str, args))
                )
        sock.sendall(b"".join([*commands, _resp("ECHO", marker)]))
        tail = b"$%d\r\n%s\r\n" % (len(marker), marker)
        received = bytearray()
        while not received.endswith(tail):
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("redis-server closed the connection while loading")
            received += chunk
        acquired = received.count(b"\r\nacquired\r\n")
        if acquired != len(commands):
            raise RuntimeError(
                f"loading: {acquired} of {len(commands)} acquired: {received[:300]!r}"
            )
        loaded += acquired
        if worker == 0 and (start // LICENSES_PER_BATCH) % 50 == 0:
            print(f"  worker 0: {loaded:,} leases", flush=True)
    sock.close()
    eng.redis.close()
    return loaded


def load_cold(url: str, sha: str, count: int, deadline: float) -> int:
    """``count`` leases, PER_COLD_LICENSE per license, loaded by LOAD_WORKERS processes."""
    licenses = [f"lic-{i:06d}" for i in range(count // PER_COLD_LICENSE)]
    jobs = [(url, sha, licenses[w::LOAD_WORKERS], deadline, w) for w in range(LOAD_WORKERS)]
    with multiprocessing.get_context("fork").Pool(LOAD_WORKERS) as pool:
        return sum(pool.map(_load_worker, jobs))


def drain_outboxes(client: Any) -> None:
    """The reaper drains the outboxes continuously: a 1M-entry stream is not the steady
    state (XADD costs the same either way, this only saves memory)."""
    pipe = client.pipeline(transaction=False)
    for shard in range(keys.SHARDS):
        pipe.xtrim(keys.outbox_key(shard), maxlen=0)
    pipe.execute()


# -- measuring -------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    usec: float  # server microseconds per call of the measured command
    inner: dict[str, tuple[float, float]]  # command run by the script -> (calls, usec) per op


def measure(client: Any, name: str, command: str, run: Callable[[], None]) -> Phase:
    """CONFIG RESETSTAT, run the phase, read its commandstats."""
    client.config_resetstat()
    run()
    stats = {k.removeprefix("cmdstat_"): v for k, v in client.info("commandstats").items()}
    main = stats.pop(command)
    calls = main["calls"]
    inner = {
        cmd: (s["calls"] / calls, s["usec"] / calls)
        for cmd, s in stats.items()
        if not cmd.startswith(("config", "info", "script", "ping"))
    }
    return Phase(name, float(main["usec_per_call"]), inner)


def one_round(
    eng: SeatEngine,
    hot: dict[str, str],
    ops: int,
    round_no: int,
    policy_hot: dict[str, str],
    waiting: list[str],
    idle: tuple[list[str], list[str]],
) -> list[Phase]:
    """One measure of every phase (``policy_hot``: the policy license's leases; the
    terms license needs none of its own: it is filled like HOT before the rounds, with
    weighted leases; ``idle``: IDLE's leases warned before the rounds, and others never
    warned; SHARED is filled like HOT, its users' groups each holding a seat)."""
    client = eng.redis
    zkey = "bench:zadd"
    floor = client.register_script("return 1")
    score = int(time.time() * 1000) + LEASE_SECONDS * 1000
    client.delete(zkey)
    for start in range(0, len(hot), 5000):  # same size as the hot lease ZSET
        client.zadd(
            zkey, {f"m{i:07d}": score + i for i in range(start, min(start + 5000, len(hot)))}
        )
    members = [f"r{round_no}-{i:07d}" for i in range(ops)]
    new_clients = [f"r{round_no}-new-{i:07d}" for i in range(ops)]
    created: dict[str, str] = {}
    old = list(hot.items())
    hot_acquire = lambda p, c: queue_acquire(eng, p, HOT, c)  # noqa: E731

    def acquire_new(pipe: Any, client_id: str) -> None:
        created[client_id] = queue_acquire(eng, pipe, HOT, client_id)

    commands_floor = client.register_script(floor_script())
    floor_made: dict[str, tuple[str, int]] = {}  # session -> (client, deadline)

    def floor_new(pipe: Any, client_id: str) -> None:
        field = keys.LicenseKeys.reply_field("acquire", client_id, new_request_id())
        now = int(time.time() * 1000)  # (later and later, as acquire's)
        sid = new_session_id()
        ks, av = floor_call(FLOOR, client_id, sid, field, now)
        floor_made[sid] = (client_id, int(av[3]))
        commands_floor(keys=ks, args=av, client=pipe)

    heartbeat_floor = client.register_script(floor_script(HEARTBEAT_COMMANDS))
    release_floor = client.register_script(floor_script(RELEASE_COMMANDS))
    floor_sessions = [f"{i:012d}" for i in range(min(ops, len(hot)))]  # fill_floor's

    def floor_heartbeat(pipe: Any, sid: str) -> None:
        field = keys.LicenseKeys.reply_field("heartbeat", sid, new_request_id())
        ks, av = heartbeat_floor_call(FLOOR, sid, field, int(time.time() * 1000))
        heartbeat_floor(keys=ks, args=av, client=pipe)

    def floor_release(pipe: Any, sid: str) -> None:
        client_id, deadline = floor_made[sid]
        field = keys.LicenseKeys.reply_field("lease.released", sid, new_request_id())
        ks, av = release_floor_call(FLOOR, client_id, sid, field, int(time.time() * 1000), deadline)
        release_floor(keys=ks, args=av, client=pipe)

    # A second lease for users holding one (their limit is 2), on the policy license.
    policy_users = [user_of(c) for c in list(policy_hot)[:ops]]
    policy_created: dict[str, str] = {}

    def acquire_policy(pipe: Any, user: str) -> None:
        client_id = f"r{round_no}-{user}"
        policy_created[client_id] = queue_acquire(eng, pipe, POLICY, client_id, user=user)

    terms_created: dict[str, str] = {}
    terms_extra_before = extra_seats(eng)
    heavy: dict[str, str] = {}  # client -> session of this round's leases of HEAVY_WEIGHT

    def acquire_heavy(pipe: Any, client_id: str) -> None:
        heavy[client_id] = queue_acquire(eng, pipe, HEAVY, client_id, seats=HEAVY_WEIGHT)

    def renew_heavy(pipe: Any, client_id: str) -> None:
        queue_acquire(eng, pipe, HEAVY, client_id, seats=HEAVY_WEIGHT)

    def acquire_terms(pipe: Any, client_id: str) -> None:
        terms_created[client_id] = queue_terms_acquire(eng, pipe, client_id)

    def renew_place(pipe: Any, client_id: str) -> None:
        queue_acquire(eng, pipe, QUEUED, client_id, user=user_of(client_id), queue=True)

    shared_created: dict[str, str] = {}
    shared_beyond = shared_beyond_seats(eng)

    def acquire_shared(pipe: Any, client_id: str) -> None:
        shared_created[client_id] = queue_shared_acquire(eng, pipe, client_id)

    warned, active = idle

    phases = [
        measure(
            client,
            "zadd (baseline)",
            "zadd",
            lambda: run_batched(client, members, lambda p, m: p.zadd(zkey, {m: score}), None),
        ),
        measure(
            client,
            "evalsha floor",
            "evalsha",
            lambda: run_batched(client, members, lambda p, _m: floor(client=p), None),
        ),
        measure(
            client,
            "acquire (new)",
            SEAT_CALL,
            lambda: run_batched(client, new_clients, acquire_new, "acquired"),
        ),
        measure(
            client,
            "acquire (shared)",
            SEAT_CALL,
            lambda: run_batched(client, [f"s{c}" for c in new_clients], acquire_shared, "acquired"),
        ),
    ]
    # each shared acquire joined its user's seat: one session more beyond the seats, no seat
    joined = shared_beyond_seats(eng) - shared_beyond
    phases += [
        measure(
            client,
            TERMS_ROW,
            SEAT_CALL,
            lambda: run_batched(client, [f"t{c}" for c in new_clients], acquire_terms, "acquired"),
        ),
        measure(
            client,
            FLOOR_ROW,
            "evalsha",
            lambda: run_batched(client, [f"f{c}" for c in new_clients], floor_new, None),
        ),
        measure(
            client,
            "acquire (policy)",
            SEAT_CALL,
            lambda: run_batched(client, policy_users, acquire_policy, "acquired"),
        ),
        measure(
            client,
            "acquire (queued)",
            SEAT_CALL,
            lambda: run_batched(
                client, [waiting[i % len(waiting)] for i in range(ops)], renew_place, "queued"
            ),
        ),
        measure(
            client,
            "acquire (renew)",
            SEAT_CALL,
            lambda: run_batched(client, [c for c, _s in old[:ops]], hot_acquire, "renewed"),
        ),
        measure(
            client,
            "heartbeat",
            SEAT_CALL,
            lambda: run_batched(
                client,
                [s for _c, s in old[-ops:]],
                lambda p, sid: queue_session(eng.scripts.heartbeat, p, HOT, sid, False),
                "ok",
            ),
        ),
        measure(
            client,
            "heartbeat (activity)",
            SEAT_CALL,
            lambda: run_batched(
                client,
                active,
                lambda p, sid: queue_idle_heartbeat(eng, p, sid, ACTIVE_IDLE_SECONDS),
                "ok",
            ),
        ),
        measure(
            client,
            "heartbeat (warned)",
            SEAT_CALL,
            lambda: run_batched(
                client,
                warned,
                lambda p, sid: queue_idle_heartbeat(eng, p, sid, WARNED_IDLE_SECONDS),
                "ok",
            ),
        ),
        measure(
            client,
            HEARTBEAT_FLOOR_ROW,
            "evalsha",
            lambda: run_batched(client, floor_sessions, floor_heartbeat, None),
        ),
        measure(
            client,
            "release",
            SEAT_CALL,
            lambda: run_batched(
                client,
                list(created.values()),  # back to --hot live leases for the next round
                lambda p, sid: queue_session(eng.scripts.release, p, HOT, sid, True),
                "released",
            ),
        ),
        measure(
            client,
            "release (shared)",
            SEAT_CALL,
            lambda: run_batched(
                client,
                list(shared_created.values()),  # each group keeps its seat: SHARED as before
                lambda p, sid: queue_session(eng.scripts.release, p, SHARED, sid, True),
                "released",
            ),
        ),
        measure(
            client,
            RELEASE_FLOOR_ROW,
            "evalsha",
            # the leases the round's acquire floor made: FLOOR back to --hot leases
            lambda: run_batched(client, list(floor_made), floor_release, None),
        ),
    ]
    # the heaviest leases: taken (not measured), then the three calls on them
    run_batched(client, [f"h{c}" for c in new_clients], acquire_heavy, "acquired")
    phases += [
        measure(
            client,
            "heartbeat (w100k)",
            SEAT_CALL,
            lambda: run_batched(
                client,
                list(heavy.values()),
                lambda p, sid: queue_session(eng.scripts.heartbeat, p, HEAVY, sid, False),
                "ok",
            ),
        ),
        measure(
            client,
            "acquire (renew w100k)",
            SEAT_CALL,
            lambda: run_batched(client, list(heavy), renew_heavy, "renewed"),
        ),
        measure(
            client,
            "release (w100k)",
            SEAT_CALL,
            lambda: run_batched(
                client,
                list(heavy.values()),  # back to --hot one-seat leases for the next round
                lambda p, sid: queue_session(eng.scripts.release, p, HEAVY, sid, True),
                "released",
            ),
        ),
    ]
    # ... and its release left it (the group kept its seat); no warning was given or
    # taken back in the round
    after = shared_beyond_seats(eng)
    if joined != ops or after != shared_beyond:
        raise RuntimeError(
            f"{SHARED}: {joined} of {ops} joined a seat; {after} sessions beyond their seats"
            f" after the round, {shared_beyond} before"
        )
    if client.zcard(keys.LicenseKeys.of(TENANT, IDLE).idlers) != len(warned):
        raise RuntimeError(f"{IDLE}: the round changed which leases are warned")
    if extra_seats(eng, HEAVY) != 0:
        raise RuntimeError(f"{HEAVY}: {extra_seats(eng, HEAVY)} extra seats after the round")
    # not measured: back to --hot leases on the terms license for the next round; their
    # release takes their weight with them
    run_batched(
        client,
        list(terms_created.values()),
        lambda p, sid: queue_session(eng.scripts.release, p, TERMS, sid, True),
        "released",
    )
    if extra_seats(eng) != terms_extra_before:
        raise RuntimeError(
            f"{TERMS}: {extra_seats(eng)} extra seats after the round, {terms_extra_before} before"
        )
    # not measured: back to one lease per user on the policy license for the next round
    run_batched(
        client,
        list(policy_created.values()),
        lambda p, sid: queue_session(eng.scripts.release, p, POLICY, sid, True),
        "released",
    )
    client.delete(zkey)
    return phases


TARGETED = ("acquire (new)", "heartbeat", "release")
# Each against acquire (new) of the same round (no policy): at most POLICY_TARGET.
POLICY_TARGETED = ("acquire (policy)", "acquire (queued)")
POLICY_TARGET = 1.3


def report_floors(rounds: list[list[Phase]]) -> bool:
    """Each seat op's server time over its own commands' floor (the same Redis commands
    with ready-made arguments, no Lua logic), same round: what the Lua costs on top."""
    names = [p.name for p in rounds[0]]
    print(
        f"\neach op over its commands' floor: per round usec_per_call ratio, median (min over"
        f" min); target at most {FLOOR_TARGET}x"
    )
    ok = True
    for op, floor in FLOORS.items():
        idx, base = names.index(op), names.index(floor)
        ratios = [r[idx].usec / r[base].usec for r in rounds]
        ratio = statistics.median(ratios)
        low = min(r[idx].usec for r in rounds) / min(r[base].usec for r in rounds)
        verdict = "PASS" if ratio <= FLOOR_TARGET else "FAIL"
        ok = ok and ratio <= FLOOR_TARGET
        cells = ", ".join(f"{x:.2f}" for x in ratios)
        usec = statistics.median(r[idx].usec for r in rounds)
        floor_usec = statistics.median(r[base].usec for r in rounds)
        print(
            f"  {op:<15} {usec:7.2f} us / {floor_usec:6.2f} us {ratio:5.2f}x ({low:.2f}x)"
            f"  (rounds: {cells})  {verdict}"
        )
    return ok


def report_policy(rounds: list[list[Phase]]) -> bool:
    """The license policy's cost: each policy phase over acquire (new), same round."""
    names = [p.name for p in rounds[0]]
    base = names.index("acquire (new)")
    print(
        f"\nlicense policy: per round usec_per_call / acquire (new) usec_per_call, median; "
        f"target at most {POLICY_TARGET}x"
    )
    ok = True
    for name in POLICY_TARGETED:
        idx = names.index(name)
        ratios = [r[idx].usec / r[base].usec for r in rounds]
        ratio = statistics.median(ratios)
        verdict = "PASS" if ratio <= POLICY_TARGET else "FAIL"
        ok = ok and ratio <= POLICY_TARGET
        cells = ", ".join(f"{x:.2f}" for x in ratios)
        print(f"  {name:<17}{ratio:>6.2f}x  (rounds: {cells})  {verdict}")
    return ok


def report_terms(rounds: list[list[Phase]]) -> bool:
    """A license's term and entitlements, the lease weighted: TERMS_ROW over acquire (new),
    same round."""
    names = [p.name for p in rounds[0]]
    base, idx = names.index("acquire (new)"), names.index(TERMS_ROW)
    ratios = [r[idx].usec / r[base].usec for r in rounds]
    ratio = statistics.median(ratios)
    verdict = "PASS" if ratio <= TERMS_TARGET else "FAIL"
    cells = ", ".join(f"{x:.2f}" for x in ratios)
    print(
        f"\nterms, entitlements and a weight of {TERMS_WEIGHT}: {TERMS_ROW} / acquire (new), "
        f"usec_per_call, median; target at most {TERMS_TARGET}x\n  {TERMS_ROW}  {ratio:>6.2f}x"
        f"  (rounds: {cells})  {verdict} (information: the rounds' phases are minutes apart)"
    )
    return True


def report_heavy(rounds: list[list[Phase]]) -> bool:
    """A weight costs what one seat costs: each heavy row over its one-seat row, same
    round."""
    names = [p.name for p in rounds[0]]
    print(
        f"\nthe heaviest lease ({HEAVY_WEIGHT:,} seats) against one seat, per round "
        f"usec_per_call ratio, median; target at most {HEAVY_TARGET}x"
    )
    ok = True
    for heavy, light in HEAVY_ROWS.items():
        idx, base = names.index(heavy), names.index(light)
        ratios = [r[idx].usec / r[base].usec for r in rounds]
        ratio = statistics.median(ratios)
        verdict = "PASS" if ratio <= HEAVY_TARGET else "FAIL"
        ok = ok and ratio <= HEAVY_TARGET
        cells = ", ".join(f"{x:.2f}" for x in ratios)
        print(f"  {heavy:<22} / {light:<16}{ratio:>6.2f}x  (rounds: {cells})  {verdict}")
    return ok


def report_idle_share(rounds: list[list[Phase]]) -> bool:
    """Idle and shared seats (issue 50): each row over the plain call of the same round."""
    names = [p.name for p in rounds[0]]
    print(
        f"\nidle and shared seats: per round usec_per_call ratio to the plain call, median"
        f" (min over min); target at most {IDLE_TARGET}x for the heartbeats, {SHARE_TARGET}x"
        f" for the shared acquire and release"
    )
    ok = True
    for row, plain in IDLE_SHARE_ROWS.items():
        idx, base = names.index(row), names.index(plain)
        ratios = [r[idx].usec / r[base].usec for r in rounds]
        ratio = statistics.median(ratios)
        low = min(r[idx].usec for r in rounds) / min(r[base].usec for r in rounds)
        target = IDLE_TARGET if row.startswith("heartbeat") else SHARE_TARGET
        verdict = "PASS" if ratio <= target else "FAIL"
        ok = ok and ratio <= target
        cells = ", ".join(f"{x:.2f}" for x in ratios)
        print(f"  {row:<21}/ {plain:<14}{ratio:>6.2f}x ({low:.2f}x)  (rounds: {cells})  {verdict}")
    return ok


def paired_terms(eng: SeatEngine, samples: int, batch: int) -> bool:
    """TERMS_ROW against acquire (new) on a shared, noisy machine: ``samples`` pairs of
    small batches, one of each, back to back (the other load of the moment weighs on both
    alike), each a new lease on a license holding as many leases as the hot one; the
    ratio of the two minima (other processes' load only ever adds time) and the median
    of the per-pair ratios. The target applies to the minima."""
    client = eng.redis
    plain_us, terms_us = [], []
    made: dict[str, list[str]] = {HOT: [], TERMS: []}

    def plain(pipe: Any, client_id: str) -> None:
        made[HOT].append(queue_acquire(eng, pipe, HOT, client_id))

    def termed(pipe: Any, client_id: str) -> None:
        made[TERMS].append(queue_terms_acquire(eng, pipe, client_id))

    for i in range(samples):
        pair = [
            ("plain", plain, HOT),
            ("terms", termed, TERMS),
        ]
        if i % 2:
            pair.reverse()  # neither always goes first
        for name, queue, _lic in pair:
            clients = [f"p{i}-{name}-{n:05d}" for n in range(batch)]
            phase = measure(
                client,
                name,
                SEAT_CALL,
                lambda q=queue, c=clients: run_batched(client, c, q, "acquired"),
            )
            (plain_us if name == "plain" else terms_us).append(phase.usec)
        for lic, sids in made.items():  # back to the same sizes for the next pair
            run_batched(
                client,
                sids,
                lambda p, sid, lic=lic: queue_session(eng.scripts.release, p, lic, sid, True),
                "released",
            )
            sids.clear()
    ratio = min(terms_us) / min(plain_us)
    pairs = statistics.median(t / p for t, p in zip(terms_us, plain_us, strict=True))
    verdict = "PASS" if ratio <= TERMS_TARGET else "FAIL"
    print(
        f"  paired, {samples} x {batch} each: acquire (new) min {min(plain_us):.2f} us, "
        f"{TERMS_ROW} min {min(terms_us):.2f} us: {ratio:.2f}x (median of the pairs "
        f"{pairs:.2f}x)  {verdict}"
    )
    return ratio <= TERMS_TARGET


def paired_idle_share(
    eng: SeatEngine,
    hot: dict[str, str],
    idle: tuple[list[str], list[str]],
    samples: int,
    batch: int,
) -> bool:
    """IDLE_SHARE_ROWS' rows against their plain calls as paired_terms measures TERMS_ROW:
    ``samples`` rounds of small batches, one of each kind back to back in an order that
    rotates (the load of the moment weighs on all alike): the heartbeats (plain on HOT,
    activity and warned on IDLE), then the acquires (new on HOT, shared on SHARED) and
    their releases (measured: the plain and the shared release), which bring both licenses
    back to their sizes. Per row, the ratio of the minima (other processes' load only ever
    adds time; the targets apply to it) and the median of the per-sample ratios."""
    client = eng.redis
    plain_sids = list(hot.values())
    warned, active = idle
    heartbeats = {
        "heartbeat": lambda p, sid: queue_session(eng.scripts.heartbeat, p, HOT, sid, False),
        "heartbeat (activity)": lambda p, sid: queue_idle_heartbeat(
            eng, p, sid, ACTIVE_IDLE_SECONDS
        ),
        "heartbeat (warned)": lambda p, sid: queue_idle_heartbeat(eng, p, sid, WARNED_IDLE_SECONDS),
    }
    sessions = {"heartbeat": plain_sids, "heartbeat (activity)": active,
                "heartbeat (warned)": warned}  # fmt: skip
    usec: dict[str, list[float]] = {name: [] for name in (*heartbeats, "acquire (new)",
                                    "acquire (shared)", "release", "release (shared)")}  # fmt: skip
    made: dict[str, dict[str, str]] = {HOT: {}, SHARED: {}}  # each sample's new leases

    def plain(pipe: Any, client_id: str) -> None:
        made[HOT][client_id] = queue_acquire(eng, pipe, HOT, client_id)

    def shared(pipe: Any, client_id: str) -> None:
        made[SHARED][client_id] = queue_shared_acquire(eng, pipe, client_id)

    for i in range(samples):
        order = list(heartbeats)
        order = order[i % 3 :] + order[: i % 3]  # each kind first in turn
        for name in order:
            pool = sessions[name]
            start = (i * batch) % max(1, len(pool) - batch)
            sids = pool[start : start + batch]
            phase = measure(
                client,
                name,
                SEAT_CALL,
                lambda q=heartbeats[name], s=sids: run_batched(client, s, q, "ok"),
            )
            usec[name].append(phase.usec)
        for leases in made.values():
            leases.clear()
        acquires = [("acquire (new)", plain, HOT, "release"),
                    ("acquire (shared)", shared, SHARED, "release (shared)")]  # fmt: skip
        if i % 2:
            acquires.reverse()
        for name, queue, _lic, _release in acquires:
            clients = [f"pair{i}-{n:07d}" for n in range(batch)]
            phase = measure(
                client,
                name,
                SEAT_CALL,
                lambda q=queue, c=clients: run_batched(client, c, q, "acquired"),
            )
            usec[name].append(phase.usec)
        for _name, _queue, lic, release in acquires:
            sids = list(made[lic].values())
            phase = measure(
                client,
                release,
                SEAT_CALL,
                lambda s=sids, lic=lic: run_batched(
                    client,
                    s,
                    lambda p, sid: queue_session(eng.scripts.release, p, lic, sid, True),
                    "released",
                ),
            )
            usec[release].append(phase.usec)
    print(f"  paired, {samples} x {batch} each (ratio of the minima; median of the samples):")
    ok = True
    for row, plain_row in IDLE_SHARE_ROWS.items():
        ratio = min(usec[row]) / min(usec[plain_row])
        pairs = statistics.median(r / p for r, p in zip(usec[row], usec[plain_row], strict=True))
        target = IDLE_TARGET if row.startswith("heartbeat") else SHARE_TARGET
        verdict = "PASS" if ratio <= target else "FAIL"
        ok = ok and ratio <= target
        print(
            f"  {row:<21}/ {plain_row:<14}min {min(usec[row]):6.2f} us / "
            f"{min(usec[plain_row]):6.2f} us {ratio:5.2f}x (samples {pairs:.2f}x)  {verdict}"
        )
    return ok


def report(rounds: list[list[Phase]], target: float) -> bool:
    print("\nper round: server usec_per_call (ratio to that round's ZADD)")
    for i, phases in enumerate(rounds, 1):
        zadd = phases[0].usec
        cells = ", ".join(f"{p.name} {p.usec:.2f} ({p.usec / zadd:.2f}x)" for p in phases)
        print(f"  round {i}: {cells}")
    print(f"\nmedian of {len(rounds)} rounds; target: each seat op at most {target:.1f}x ZADD")
    print("(min: lowest usec of the rounds and its ratio to the lowest ZADD; load from other")
    print(" processes only adds time, so the minimums are the least disturbed estimate)")
    print(
        f"  {'op':<27}{'usec_per_call':>14}{'ratio':>9}{'min usec':>10}{'min ratio':>10}  verdict"
    )
    ok = True
    zadd_min = min(r[0].usec for r in rounds)
    for idx, phase in enumerate(rounds[0]):
        usec = statistics.median(r[idx].usec for r in rounds)
        ratio = statistics.median(r[idx].usec / r[0].usec for r in rounds)
        low = min(r[idx].usec for r in rounds)
        verdict = "baseline" if idx == 0 else "info"
        if phase.name in TARGETED:
            verdict = "PASS" if ratio <= target else "FAIL"
            ok = ok and ratio <= target
        print(
            f"  {phase.name:<27}{usec:>14.2f}{ratio:>8.2f}x{low:>10.2f}{low / zadd_min:>9.2f}x"
            f"  {verdict}"
        )
    print("\nwhere the time goes (last round; commands run inside each script, per op)")
    for phase in rounds[-1][2:]:
        commands = sum(usec for _calls, usec in phase.inner.values())
        print(
            f"  {phase.name}: {phase.usec:.2f} us = commands {commands:.2f} us"
            f" + Lua and Lua/Redis boundary {phase.usec - commands:.2f} us"
        )
        parts = sorted(phase.inner.items(), key=lambda kv: -kv[1][1])
        print("    " + ", ".join(f"{cmd} {c:g}x {u:.2f}us" for cmd, (c, u) in parts))
    return ok


# -- the commands' floor ------------------------------------------------------------------

# load_config's HMGET of the cached configuration (_lib.lua)
CONFIG_FIELDS = ("exists", "seats", "lease_seconds", "max_lease_seconds", "overage_percent",
                 "suspended", "max_borrow_seconds", "linger_seconds", "policy",
                 "terms", "idle", "share")  # fmt: skip

# The Redis commands acquire.lua runs for a new lease on a license without a policy and
# without a rate limit, in its order: (command, argument, ...), each argument a KEYS[i] of
# acquire's own keys, an ARGV[i] of floor_call's ready-made texts, or a Lua constant. The
# floor row runs exactly these in one script and nothing else (no Lua logic, no number
# formatting, no JSON, no reply packing; it returns 1 where acquire returns its reply): what
# a new lease costs Redis however its script is written. tests/test_bench_floor.py checks
# the list against what a real new lease runs (INFO commandstats), so they cannot drift.
NEW_LEASE_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("HGET", "KEYS[8]", "ARGV[1]"),  # replay: the call's field in the generation 0 hash
    ("HGET", "KEYS[10]", "ARGV[1]"),  # ... and in generation 1's
    ("HMGET", "KEYS[1]", *(f"'{field}'" for field in CONFIG_FIELDS)),  # load_config
    ("TIME",),  # now_ms: the call's one server time
    ("GET", "KEYS[23]"),  # the shard's mark: a recovery window the service opened?
    ("ZRANGEBYSCORE", "KEYS[2]", "'-inf'", "ARGV[2]", "'LIMIT'", "'0'", "'100'"),  # prune
    ("HGET", "KEYS[4]", "ARGV[3]"),  # the client's own lease (none)
    ("ZCARD", "KEYS[2]"),  # seats used: the leases ...
    ("GET", "KEYS[17]"),  # ... the weighted leases' extra seats (wsum: none here) ...
    ("ZCARD", "KEYS[16]"),  # ... the release before's weighted leases' seats (units) ...
    ("HGET", "KEYS[11]", "'#ssum'"),  # ... less the shared leases beyond their seats (none)
    ("HGET", "KEYS[18]", "ARGV[3]"),  # the client's refusals to mark served (none)
    ("GET", "KEYS[22]"),  # the longest lease granted recently (noted already: no SET)
    ("ZADD", "KEYS[2]", "ARGV[4]", "ARGV[5]"),  # the lease and its deadline
    ("HSET", "KEYS[3]", "ARGV[5]", "ARGV[6]"),  # its record
    ("HSET", "KEYS[4]", "ARGV[3]", "ARGV[5]"),  # the client's lease
    ("ZADD", "KEYS[5]", "ARGV[4]", "ARGV[7]"),  # the reaper's deadline index
    ("XADD", "KEYS[6]", "'*'", "'e'", "ARGV[8]"),  # the lease.acquired event
    ("HSET", "KEYS[8]", "ARGV[1]", "ARGV[9]"),  # the stored reply ...
    ("PEXPIREAT", "KEYS[8]", "ARGV[10]"),  # ... and its hash's expiry
)


# The same for a heartbeat of a live one-seat lease (heartbeat.lua, in its order; KEYS are
# heartbeat_call's, ARGV heartbeat_floor_call's) ...
HEARTBEAT_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("HGET", "KEYS[7]", "ARGV[1]"),  # replay: generation 0 ...
    ("HGET", "KEYS[9]", "ARGV[1]"),  # ... and 1
    ("ZSCORE", "KEYS[2]", "ARGV[2]"),  # the lease's deadline
    ("TIME",),
    ("HMGET", "KEYS[1]", "'exists'", "'terms'", "'seats'", "'idle'"),  # the config, as needed
    ("HGET", "KEYS[3]", "ARGV[2]"),  # the lease's record
    ("ZADD", "KEYS[2]", "ARGV[3]", "ARGV[2]"),  # the new deadline ...
    ("ZADD", "KEYS[5]", "ARGV[3]", "ARGV[4]"),  # ... in the reaper's index too
    ("HSET", "KEYS[7]", "ARGV[1]", "ARGV[5]"),  # the stored reply ...
    ("PEXPIREAT", "KEYS[7]", "ARGV[6]"),  # ... and its hash's expiry
)

# ... and for a client's release of a live one-seat lease on a license without linger
# and without a queue (release.lua; KEYS release_call's, ARGV release_floor_call's).
RELEASE_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("HGET", "KEYS[7]", "ARGV[1]"),  # replay: generation 0 ...
    ("HGET", "KEYS[9]", "ARGV[1]"),  # ... and 1
    ("HMGET", "KEYS[1]", *(f"'{field}'" for field in CONFIG_FIELDS)),  # load_config
    ("TIME",),
    ("ZSCORE", "KEYS[2]", "ARGV[2]"),  # the lease's deadline
    ("HGET", "KEYS[3]", "ARGV[2]"),  # its record
    ("ZREMRANGEBYSCORE", "KEYS[17]", "'-inf'", "ARGV[3]"),  # ended: notes whose tokens expired
    ("ZSCORE", "KEYS[17]", "ARGV[2]"),  # ... this lease's note, if any ...
    ("ZADD", "KEYS[17]", "ARGV[4]", "ARGV[2]"),  # ... noted until its tokens expire ...
    ("PTTL", "KEYS[17]"),  # ... and the notes' key lives that long (it does: an hour more)
    ("ZREM", "KEYS[2]", "ARGV[2]"),  # drop_lease: the lease ...
    ("HDEL", "KEYS[3]", "ARGV[2]"),  # ... its record ...
    ("ZREM", "KEYS[5]", "ARGV[5]"),  # ... its entry in the reaper's index ...
    ("HGET", "KEYS[4]", "ARGV[6]"),  # ... and its client's entry, when still its own
    ("HDEL", "KEYS[4]", "ARGV[6]"),
    ("ZCOUNT", "KEYS[2]", "ARGV[7]", "'+inf'"),  # seats used: the live leases ...
    ("ZCOUNT", "KEYS[15]", "ARGV[7]", "'+inf'"),  # ... the release before's units ...
    ("GET", "KEYS[16]"),  # ... the weighted leases' extra seats (wsum) ...
    ("HGET", "KEYS[10]", "'#ssum'"),  # ... less the shared leases beyond their seats (none)
    ("XADD", "KEYS[6]", "'*'", "'e'", "ARGV[8]"),  # the lease.released event
    ("HSET", "KEYS[7]", "ARGV[1]", "ARGV[9]"),  # the stored reply ...
    ("PEXPIREAT", "KEYS[7]", "ARGV[10]"),  # ... and its hash's expiry
)


def heartbeat_floor_call(
    license_id: str, session_id: str, field: str, now_ms: int
) -> tuple[list[str], list[str]]:
    """HEARTBEAT_COMMANDS' KEYS (heartbeat's own) and ARGV: the texts a heartbeat of
    ``session_id`` at ``now_ms`` writes (its new deadline, a packed ``ok`` reply)."""
    key_list, _args = heartbeat_call(TENANT, license_id, session_id, request_id="r")
    lease_ms = LEASE_SECONDS * 1000
    deadline = now_ms + lease_ms
    packed = f"O@{deadline - 1790000000000:x} {lease_ms:x}' 0~c-{session_id}"
    return key_list, [
        field,
        session_id,
        str(deadline),
        f"{TENANT}/{license_id}|{session_id}",
        packed,
        str(now_ms + 2 * 3_600_000),
    ]


def release_floor_call(
    license_id: str, client_id: str, session_id: str, field: str, now_ms: int, deadline: int
) -> tuple[list[str], list[str]]:
    """RELEASE_COMMANDS' KEYS (release's own) and ARGV: the texts a release of
    ``session_id`` (``client_id``'s, ending at ``deadline``) at ``now_ms`` writes."""
    key_list, _args = release_call(TENANT, license_id, session_id, request_id="r")
    event = (
        f'{{"event_id":"0123456789abcdef-1","type":"lease.released","tenant_id":"{TENANT}",'
        f'"license_id":"{license_id}","session_id":"{session_id}","client_id":"{client_id}",'
        f'"occurred_at":"2026-11-24T12:00:00.000Z","seats_used":10000,'
        f'"seats_total":{SEATS},"count":1,"metadata":{META}}}'
    )
    return key_list, [
        field,
        session_id,
        str(now_ms),
        str(deadline),
        f"{TENANT}/{license_id}|{session_id}",
        client_id,
        f"({now_ms}",
        event,
        f"L 2710 989680 0@{now_ms - 1790000000000:x}",
        str(now_ms + 2 * 3_600_000),
    ]


def fill_floor(eng: SeatEngine, hot: int) -> None:
    """FLOOR as large as the acquire rows' licenses (once: both phases use it)."""
    if not eng.redis.zcard(keys.LicenseKeys.of(TENANT, FLOOR).leases):
        fill_license(eng, FLOOR, hot, "f", numbered=True)


def floor_script(commands: tuple[tuple[str, ...], ...] = NEW_LEASE_COMMANDS) -> str:
    """``commands`` (default: NEW_LEASE_COMMANDS) as one Lua script."""
    calls = [f"redis.call('{cmd}'{''.join(', ' + a for a in args)})"
             for cmd, *args in commands]  # fmt: skip
    return "\n".join([*calls, "return 1"])


def floor_call(
    license_id: str,
    client_id: str,
    session_id: str,
    field: str,
    now_ms: int,
    deadline: str | None = None,
) -> tuple[list[str], list[str]]:
    """floor_script's KEYS (acquire's own, for ``license_id``) and ARGV: the texts a new
    lease's commands take, made here (about the sizes acquire makes: a session record, an
    event, a packed reply), for ``client_id`` taking ``session_id`` at ``now_ms``, its
    deadline ``deadline`` (default: now_ms + the lease). Calls should not all share one
    deadline: members of one score are ordered by comparing their names, dearer than
    acquire's ever later deadlines."""
    key_list, _args = acquire_call(TENANT, license_id, client_id, request_id="r")
    lease_ms, lk = LEASE_SECONDS * 1000, f"{TENANT}/{license_id}"
    deadline = deadline or str(now_ms + lease_ms)
    record = {"c": client_id, "a": now_ms, "l": lease_ms, "m": META, "t": SEATS}
    event = (
        f'{{"event_id":"0123456789abcdef-1","type":"lease.acquired","tenant_id":"{TENANT}",'
        f'"license_id":"{license_id}","session_id":"{session_id}","client_id":"{client_id}",'
        f'"occurred_at":"2026-11-24T12:00:00.000Z","seats_used":10001,'
        f'"seats_total":{SEATS},"count":1,"metadata":{META}}}'
    )
    packed = f"A~{session_id}@4c4b40 36ee80 2711 989680\"' 0"
    return key_list, [
        field,
        str(now_ms),
        client_id,
        deadline,
        session_id,
        json.dumps(record, separators=(",", ":")),
        f"{lk}|{session_id}",
        event,
        packed,
        str(now_ms + 2 * 3_600_000),  # the reply hash's expiry: ahead, as remember's is
    ]


# -- throughput with 50 clients (redis-benchmark), for information --------------------


def redis_benchmark(port: int, requests: int, keyspace: int, *command: str) -> tuple[float, float]:
    """(requests/s, p50 ms) of one command line, 50 clients, no pipelining."""
    out = subprocess.run(
        ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "50",
         "-n", str(requests), "-r", str(keyspace), "--csv", *command],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    # test,rps,avg,min,p50,p95,p99,max: the test name (the command) may hold commas/quotes
    row = [cell.strip('"') for cell in out.strip().splitlines()[-1].split(",")[-7:]]
    return float(row[0]), float(row[3])


def throughput(eng: SeatEngine, port: int, hot: int, requests: int) -> None:
    """Requests per second with 50 connections, network and parsing included, as in
    docs/design.md's redis-benchmark figures (ZADD 81k/s, a four-command script 38k/s)."""
    if shutil.which("redis-benchmark") is None:
        print("\nredis-benchmark not found (Debian's redis-tools): throughput skipped")
        return
    fill_license(eng, THROUGHPUT, hot, "t", numbered=True)
    eng.cache_config(TENANT_LIMITED, THROUGHPUT, load_config(TENANT_LIMITED, THROUGHPUT))
    eng.scripts.library.load()  # (redis-benchmark calls its functions by name)
    acquire_fn, heartbeat_fn = library_function("acquire"), library_function("heartbeat")
    rand = "__rand_int__"
    # session ids 000000000000..: every heartbeat hits a live lease of the license; every
    # call has its own reply field, as a real client's calls do (the field is a digest made
    # in Python, so the placeholder goes in the field itself: with a constant field every
    # call after the first would be answered from the stored reply). redis-benchmark draws
    # each __rand_int__ on its own: the heartbeat's field takes two, its session ids being
    # only --hot of them.
    hb_keys, hb_args = heartbeat_call(TENANT, THROUGHPUT, rand, request_id=f"r{rand}")
    acq_keys, acq_args = acquire_call(
        TENANT, THROUGHPUT, f"c{rand}", metadata_json=META, request_id=f"r{rand}",
        session_id=f"s{rand}", event_prefix=f"p{rand}",
    )  # fmt: skip
    # the same acquire under a tenant rate limit that never refuses: every call pays the
    # budget's TIME, GET and SET (one tenant key per shard, so its own tenant here)
    lim_keys, lim_args = acquire_call(
        TENANT_LIMITED, THROUGHPUT, f"c{rand}", metadata_json=META, request_id=f"r{rand}",
        session_id=f"s{rand}", event_prefix=f"p{rand}", rate_limit=NEVER_REFUSES,
    )  # fmt: skip
    hb_args[HB_FIELD] = f"h{rand}{rand}"
    acq_args[ACQ_FIELD] = lim_args[ACQ_FIELD] = f"a{rand}"
    # the commands' floor: a new lease's commands alone, on a license of its own as large
    # as THROUGHPUT
    fill_floor(eng, hot)
    floor_sha = eng.redis.script_load(floor_script())
    # (deadline: 2 and 12 random digits, 13 digits as a time in ms and ahead of now, so the
    # prune finds nothing, as acquire's)
    floor_keys, floor_args = floor_call(
        FLOOR, f"c{rand}", f"s{rand}", f"a{rand}", int(time.time() * 1000), f"2{rand}"
    )
    cases = {
        "zadd": (10**9, ["zadd", "bench:tput", rand, f"m{rand}"]),
        "heartbeat": (hot, ["fcall", heartbeat_fn, str(len(hb_keys)), *hb_keys,
                            *map(str, hb_args)]),
        "acquire (new)": (10**9, ["fcall", acquire_fn, str(len(acq_keys)), *acq_keys,
                                  *map(str, acq_args)]),
        "acquire (rate)": (10**9, ["fcall", acquire_fn, str(len(lim_keys)), *lim_keys,
                                   *map(str, lim_args)]),
        FLOOR_ROW: (10**9, ["evalsha", floor_sha, str(len(floor_keys)), *floor_keys,
                            *floor_args]),
    }  # fmt: skip
    leases = {t: keys.LicenseKeys.of(t, THROUGHPUT).leases for t in (TENANT, TENANT_LIMITED)}
    before = {t: eng.redis.zcard(key) for t, key in leases.items()}
    results = {name: redis_benchmark(port, requests, ks, *cmd) for name, (ks, cmd) in cases.items()}
    zadd_rps = results["zadd"][0]
    print(f"\nthroughput, 50 clients, {requests:,} requests each (redis-benchmark; information)")
    for name, (rps, p50) in results.items():
        print(f"  {name:<18}{rps:>10,.0f} req/s  p50 {p50:.3f} ms  ZADD/op {zadd_rps / rps:.2f}x")
    # the acquires took new leases (not replays, not errors): about one a request
    new = {t: eng.redis.zcard(key) - before[t] for t, key in leases.items()}
    print(f"  new leases: {new[TENANT]:,} without a limit, {new[TENANT_LIMITED]:,} with one")
    acquire, floor = (zadd_rps / results[row][0] for row in ("acquire (new)", FLOOR_ROW))
    verdict = "PASS" if acquire <= THROUGHPUT_TARGET else "FAIL"
    print(
        f"  target: acquire (new) at most {THROUGHPUT_TARGET}x ZADD/op: {acquire:.2f}x, {verdict}"
        f"; the floor, its {len(NEW_LEASE_COMMANDS)} commands alone with ready-made arguments"
        f" (no Lua logic): {floor:.2f}x"
    )


# -- step profile (--profile) ------------------------------------------------------------

_STATEMENT = re.compile(r"^(local |redis\.call|reclaim|emit|if |return )")


def truncations(name: str) -> list[tuple[str, str]]:
    """(step, script) pairs: the registered script cut short before each top-level
    statement of ``<name>.lua``, then the whole script. A step is the statement the next
    cut adds (with any block it opens)."""
    full = script_source(name)
    lines = (resources.files("seatlease.seats") / "lua" / f"{name}.lua").read_text().split("\n")
    head = full[: len(full) - len("\n".join(lines))]  # _lib.lua and the separator
    cuts = [i for i, line in enumerate(lines) if _STATEMENT.match(line)]
    variants = []
    for n, cut in enumerate(cuts):
        step = lines[cuts[n - 1]].strip() if n else "(preludes: _lib.lua ..., KEYS/ARGV tables)"
        src = head + "\n".join([*lines[:cut], "do return {'cut'} end", *lines[cut:]])
        variants.append((step, src))
    variants.append((lines[cuts[-1]].strip(), full))
    return variants


# Per-iteration costs of the pieces the seat scripts are made of, each run 10 times in one
# EVALSHA: (label, loop body, keys, args). KEYS[1] is a lease ZSET, KEYS[2] a config hash.
MICRO = [
    ("redis.call('ZSCORE') of a lease, string args", "redis.call('ZSCORE', KEYS[1], ARGV[1])"),
    ("redis.call('ZCARD')", "redis.call('ZCARD', KEYS[1])"),
    ("redis.call('ZCOUNT', '(' .. now, '+inf')",
     "redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')"),
    ("same ZCOUNT, '(<now>' passed as a string",
     "redis.call('ZCOUNT', KEYS[1], ARGV[2], '+inf')"),
    ("redis.call('TIME') + now_ms arithmetic", "now_ms()"),
    ("load_config (HMGET of 9 fields, tonumber, a table)", "load_config(KEYS[2])"),
    ("redis.call('HMGET') of the 6 config fields",
     "redis.call('HMGET', KEYS[2], 'exists', 'seats', 'lease_seconds', 'max_lease_seconds',"
     " 'overage_percent', 'suspended')"),
    ("cjson.encode(lease record)", "cjson.encode({c = ARGV[1], a = now, l = 360000, m = ARGV[3]})"),
    ("cjson.decode(lease record)", "cjson.decode(ARGV[4])"),
    ("Lua number -> string ('' .. now)", "local _ = '' .. now"),
    ("string.format('%d', now)", "local _ = string.format('%d', now)"),
]  # fmt: skip


def _min_usec(
    client: Any, script: Any, ks: list[str], av: list[str], reps: int, calls: int
) -> float:
    """Lowest usec_per_call of ``reps`` samples: load from other processes only ever adds
    time, so the minimum is the best estimate of the script's own cost."""
    samples = []
    for _rep in range(reps):
        phase = measure(
            client,
            "micro",
            "evalsha",
            lambda: run_batched(
                client, list(range(calls)), lambda p, _i: script(keys=ks, args=av, client=p), None
            ),
        )
        samples.append(phase.usec)
    return min(samples)


def profile(eng: SeatEngine, hot: int, reps: int, calls: int) -> None:
    client = eng.redis
    sessions = fill_license(eng, PROFILED, hot, "p")
    sids = list(sessions.values())
    k = keys.LicenseKeys.of(TENANT, PROFILED)
    lib = helpers_source()
    now = int(time.time() * 1000)
    record = json.dumps({"c": "client", "a": now, "l": 360000, "m": META})
    micro_keys = [k.leases, k.cfg]
    micro_args = [sids[0], f"({now}", META, record]
    prelude = f"{lib}\nlocal now = {now}\n"
    empty = _min_usec(client, client.register_script(prelude), micro_keys, micro_args, reps, calls)
    acquire_keys, acquire_args = acquire_call(
        TENANT, PROFILED, "c", metadata_json=META, request_id="r" * 16, session_id="s" * 24,
        event_prefix="p" * 16,
    )  # fmt: skip
    preludes = "\n".join(
        (resources.files("seatlease.seats") / "lua" / f"{part}.lua").read_text()
        for part in ("_lib", *PRELUDES["acquire"])
    )
    counts = f"{len(acquire_keys)} keys + {len(acquire_args)} args"
    fixed = {
        "EVALSHA 'return 1', no keys": ("return 1", [], []),
        f"EVALSHA 'return 1', acquire's {counts}": ("return 1", acquire_keys, acquire_args),
        f"EVALSHA '_lib.lua; return 1', {counts}": (
            lib + "\nreturn 1",
            acquire_keys,
            acquire_args,
        ),
        f"EVALSHA 'acquire's preludes; return 1', {counts}": (
            preludes + "\nreturn 1",
            acquire_keys,
            acquire_args,
        ),
        f"the same and begin_policy() (a license with a policy), {counts}": (
            preludes + "\nbegin_policy()\nreturn 1",
            acquire_keys,
            acquire_args,
        ),
    }
    print(f"\nfixed cost of an EVALSHA (min of {reps} x {calls:,} calls, server usec)")
    for label, (src, ks, av) in fixed.items():
        usec = _min_usec(client, client.register_script(src), ks, av, reps, calls)
        print(f"  {usec:>7.2f}  {label}")
    print(
        f"\nLua building blocks, per use (min of {reps} x {calls:,} calls of 10 uses, server usec)"
    )
    for label, body in MICRO:
        script = client.register_script(f"{prelude}for _i = 1, 10 do {body} end")
        usec = _min_usec(client, script, micro_keys, micro_args, reps, calls)
        print(f"  {(usec - empty) / 10:>7.2f}  {label}")

    for name in ("acquire", "heartbeat"):
        variants = [(step, client.register_script(src)) for step, src in truncations(name)]
        samples: list[list[float]] = [[] for _ in variants]
        for rep in range(reps):  # interleaved, so drift in the machine's load spreads evenly
            for idx, (_step, script) in enumerate(variants):
                if name == "acquire":
                    items = [f"v{rep}-{idx}-{i}" for i in range(calls)]

                    def queue(p: Any, c: str, s: Any = script) -> None:
                        ks, av = acquire_call(
                            TENANT, PROFILED, c, metadata_json=META, request_id=new_request_id()
                        )
                        s(keys=ks, args=av, client=p)
                else:
                    items = sids[:calls]

                    def queue(p: Any, sid: str, s: Any = script) -> None:
                        ks, av = heartbeat_call(TENANT, PROFILED, sid, request_id=new_request_id())
                        s(keys=ks, args=av, client=p)

                phase = measure(
                    client,
                    name,
                    "evalsha",
                    lambda i=items, q=queue: run_batched(client, i, q, None),
                )
                samples[idx].append(phase.usec)
        print(f"\n{name}.lua cut short before each statement (min of {reps} x {calls:,} calls)")
        print("     step  total  statement added by this cut")
        previous = 0.0
        for (step, _script), values in zip(variants, samples, strict=True):
            low = min(values)
            print(f"  {low - previous:>+7.2f} {low:>6.2f}  {step[:80]}")
            previous = low


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument("--total", type=int, default=1_000_000, help="live leases in the store")
    parser.add_argument("--hot", type=int, default=10_000, help="live leases on the hot license")
    parser.add_argument("--ops", type=int, default=5_000, help="calls per phase and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--pairs", type=int, default=15, help="paired samples (terms; idle and shared seats)"
    )
    parser.add_argument("--target", type=float, default=3.0)
    parser.add_argument("--profile", action="store_true", help="step-by-step Lua profile")
    parser.add_argument("--max-seconds", type=float, default=240.0, help="bound on loading")
    parser.add_argument(
        "--throughput-only", action="store_true", help="only the redis-benchmark phase"
    )
    parser.add_argument("--strict", action="store_true", help="exit 2 when the target is missed")
    args = parser.parse_args(argv)
    started = time.monotonic()
    server = start_redis()
    try:
        eng = new_engine(server.url)
        client = eng.redis
        version = client.info("server")["redis_version"]
        print(f"redis-server {version} on loopback, Python {platform.python_version()}")
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        if args.throughput_only:
            throughput(eng, port, args.hot, requests=50_000)
            client.close()
            return 0
        print(f"loading {args.total:,} live leases ({args.hot:,} on the hot license) ...")
        hot = fill_license(eng, HOT, args.hot, "client")
        # the policy licenses: as many leases as HOT (one per user), and a full one with
        # WAITING clients in line
        policy_hot = fill_license(eng, POLICY, args.hot, "pclient", users=True)
        fill_license(eng, TERMS, args.hot, "tclient")
        fill_license(eng, HEAVY, args.hot, "hclient")  # one seat each, as HOT's
        # IDLE as large as HOT: half its leases warned, the other half never
        idle_sids = list(fill_license(eng, IDLE, args.hot, "iclient").values())
        half = len(idle_sids) // 2
        warn_idle(eng, idle_sids[:half][: args.ops])
        idle = (idle_sids[:half][: args.ops], idle_sids[half:][: args.ops])
        fill_license(eng, SHARED, max(args.hot, SHARED_USERS), "sclient")  # every user's seat
        waiting = fill_queue(eng)
        fill_floor(eng, args.hot)
        sha = client.script_load(script_source("acquire"))
        cold = load_cold(server.url, sha, args.total - args.hot, started + args.max_seconds)
        drain_outboxes(client)
        loaded, secs = args.hot + cold, time.monotonic() - started
        print(
            f"loaded {loaded:,} live leases in {secs:.0f} s: {client.dbsize():,} keys, "
            f"{client.info('memory')['used_memory_human']} used"
        )
        rounds = [
            one_round(eng, hot, args.ops, i, policy_hot, waiting, idle) for i in range(args.rounds)
        ]
        ok = report(rounds, args.target)
        ok = report_floors(rounds) and ok
        ok = report_policy(rounds) and ok
        ok = report_terms(rounds) and ok
        ok = report_heavy(rounds) and ok
        ok = report_idle_share(rounds) and ok
        ok = paired_idle_share(eng, hot, idle, samples=args.pairs, batch=1000) and ok
        ok = paired_terms(eng, samples=args.pairs, batch=1000) and ok
        throughput(eng, port, args.hot, requests=50_000)
        if args.profile:
            profile(eng, args.hot, reps=7, calls=2000)
        print(f"\ntotal {time.monotonic() - started:.0f} s")
        client.close()
    finally:
        server.stop()
    return 2 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
