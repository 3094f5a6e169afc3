"""A hostile review of issue 50's seat engine change (idle seats and shared seats): each
test is a promise the change breaks, written as the scenario that shows it, and marked
strict xfail until the engine keeps it (the suite stays green; a fix turns it into a pass,
which strict xfail reports, so the mark goes with the fix). Real redis-server (and the
local Redis Cluster, through ``seat_engine``), nothing mocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seatlease.errors import NoSeatsAvailable, SessionExpired, UserLimitReached
from seatlease.events import pubsub
from seatlease.seats import keys, redisconn
from seatlease.seats.engine import SeatEngine, SeatRequest
from seatlease.seats.policy import LicensePolicy

REPO = Path(__file__).resolve().parent.parent
# The release before issue 50's engine change (brief: git diff 2b771d3..HEAD).
RELEASE_BEFORE = "2b771d3"


def events(eng: SeatEngine, license_id: str = "lic") -> list[dict]:
    return pubsub.outbox_events(eng.redis, keys.outbox_key(keys.shard_of("t", license_id)))


def ask(eng: SeatEngine, client: str, user: str | None = None, host: str | None = None, **kw):
    return eng.acquire(SeatRequest("t", "lic", client, user=user, host=host, **kw))


def warn_passed(eng: SeatEngine, session_id: str, license_id: str = "lic") -> None:
    """The warned lease's reclaim time has come (what waiting one interval would do), as
    tests/test_idle_share.py moves it."""
    k = keys.LicenseKeys.of("t", license_id)
    past = eng.server_time_ms() - 1
    eng.redis.zadd(k.idlers, {session_id: past}, xx=True)
    rec = json.loads(eng.redis.hget(k.sessions, session_id))
    rec["iw"] = past
    eng.redis.hset(k.sessions, session_id, json.dumps(rec))


def reclaimed_for_idleness(eng: SeatEngine) -> list[str]:
    return [
        e["session_id"]
        for e in events(eng)
        if e["type"] == "lease.reclaimed" and e["metadata"].get("reason") == "idle"
    ]


def policy(**rules) -> str:
    return LicensePolicy(**rules).redis_form()


# -- when_needed reclaims a lease that gives the caller nothing ------------------------


def test_an_idle_session_on_a_shared_seat_is_not_reclaimed_for_a_caller_it_cannot_help(
    seat_engine, configs
):
    # 1 seat shared by user, when_needed: ann works on ws-1, her copy on ws-2 is idle
    configs.add("t", "lic", seats=1, lease_seconds=30, share="user", idle_timeout_seconds=60)
    active = ask(seat_engine, "ann-ws1", user="ann", host="ws-1")
    idle = ask(seat_engine, "ann-ws2", user="ann", host="ws-2")
    assert idle.shared_sessions == 2
    seat_engine.heartbeat("t", "lic", idle.session_id, idle_seconds=3600)
    warn_passed(seat_engine, idle.session_id)
    # bob needs a seat: reclaiming ann's idle copy cannot give him one (ann-ws1 holds it)
    with pytest.raises(NoSeatsAvailable):
        ask(seat_engine, "bob", user="bob")
    seat_engine.heartbeat("t", "lic", active.session_id)
    # expected: ann's idle copy kept (nobody it could serve); actual: 410 reason idle
    kept = seat_engine.heartbeat("t", "lic", idle.session_id, idle_seconds=3700)
    assert kept.idle_reclaim_at_ms is not None
    assert reclaimed_for_idleness(seat_engine) == []


def test_an_idle_lease_is_not_reclaimed_for_a_weighted_caller_that_is_refused_anyway(
    seat_engine, configs
):
    configs.add("t", "lic", seats=2, lease_seconds=30, idle_timeout_seconds=60)
    ask(seat_engine, "busy")
    idle = ask(seat_engine, "idle")
    seat_engine.heartbeat("t", "lic", idle.session_id, idle_seconds=3600)
    warn_passed(seat_engine, idle.session_id)
    # a render node asks for both seats: one idle seat cannot make room for it
    with pytest.raises(NoSeatsAvailable):
        ask(seat_engine, "render", seats=2)
    # expected: the idle lease kept; actual: reclaimed (410 idle), the seat left empty
    assert seat_engine.heartbeat("t", "lic", idle.session_id, idle_seconds=3700)
    assert reclaimed_for_idleness(seat_engine) == []


def test_an_idle_lease_is_not_reclaimed_for_a_caller_the_policy_refuses(seat_engine, configs):
    configs.add(
        "t",
        "lic",
        seats=2,
        lease_seconds=30,
        idle_timeout_seconds=60,
        policy=policy(max_per_user=1),
    )
    ask(seat_engine, "ann-1", user="ann")
    idle = ask(seat_engine, "carl-1", user="carl")
    seat_engine.heartbeat("t", "lic", idle.session_id, idle_seconds=3600)
    warn_passed(seat_engine, idle.session_id)
    with pytest.raises(UserLimitReached):  # ann has her one seat: refused whatever is free
        ask(seat_engine, "ann-2", user="ann")
    # expected: carl's idle lease kept; actual: reclaimed for a call that could not use it
    assert seat_engine.heartbeat("t", "lic", idle.session_id, idle_seconds=3700)
    assert reclaimed_for_idleness(seat_engine) == []


# -- sharing meets the policy -----------------------------------------------------------


def test_max_per_user_one_holds_when_the_seat_taker_of_a_group_ends(seat_engine, configs):
    # design.md: "with --max-per-user 1 and --share user ... a session that needs a
    # second seat for her is 409 user_limit_reached"
    configs.add(
        "t",
        "lic",
        seats=3,
        lease_seconds=30,
        share="user",
        share_limit=2,
        policy=policy(max_per_user=1),
    )
    first = ask(seat_engine, "ann-1", user="ann")  # takes ann's seat (counted for ann)
    ask(seat_engine, "ann-2", user="ann")  # joins it
    seat_engine.release("t", "lic", first.session_id)  # ann-2 keeps the seat
    ask(seat_engine, "ann-3", user="ann")  # joins: 2 sessions on ann's one seat
    # ann's group is full: her next session needs a second seat, past her limit of 1
    with pytest.raises(UserLimitReached):
        ask(seat_engine, "ann-4", user="ann")


# -- a borrow never idle -----------------------------------------------------------------


def test_a_lingering_warned_lease_taken_back_as_a_borrow_is_not_warned(seat_engine, configs):
    configs.add(
        "t",
        "lic",
        seats=3,
        lease_seconds=30,
        linger_seconds=300,
        max_borrow_seconds=3600,
        idle_timeout_seconds=60,
    )
    lease = ask(seat_engine, "laptop")
    assert seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=120).idle_reclaim_at_ms
    seat_engine.release("t", "lic", lease.session_id)  # lingers, still warned
    borrow = ask(seat_engine, "laptop", seats=2, borrow_seconds=600)
    assert borrow.session_id == lease.session_id and borrow.borrowed
    row = seat_engine.live_leases("t", "lic")[0]
    assert row["borrowed"]
    k = keys.LicenseKeys.of("t", "lic")
    # expected: no warning on a borrow, no idlers entry; actual: both kept
    assert (row["idle_reclaim_at_ms"], seat_engine.redis.zcard(k.idlers)) == (None, 0)


# -- always: a warned lease reclaimed at its time ---------------------------------------


def test_under_always_a_warned_lease_is_reclaimed_at_its_time_or_no_longer_warned(
    seat_engine, configs
):
    configs.add(
        "t", "lic", seats=1, lease_seconds=3, idle_timeout_seconds=60, idle_reclaim="always"
    )
    lease = ask(seat_engine, "idle")
    warned = seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=61)
    assert warned.expires_at_ms == warned.idle_reclaim_at_ms
    again = ask(seat_engine, "idle")  # its own client's renewal by acquire
    row = seat_engine.live_leases("t", "lic")[0]
    # expected: a warned lease's deadline is its idle_reclaim_at, or the warning is gone;
    # actual: warned at T, deadline T + 2 s
    assert row["idle_reclaim_at_ms"] is None or again.expires_at_ms <= row["idle_reclaim_at_ms"]


def test_a_heartbeat_never_renews_to_a_deadline_already_passed(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=30, idle_timeout_seconds=60)
    lease = ask(seat_engine, "idle")
    seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=120)
    warn_passed(seat_engine, lease.session_id)  # nobody needed it: it heartbeats on
    configs.add(
        "t", "lic", seats=1, lease_seconds=30, idle_timeout_seconds=60, idle_reclaim="always"
    )
    seat_engine.cache_config("t", "lic", configs("t", "lic"))
    # expected: reclaimed now (410 idle) or renewed into the future; actual: 200 'ok' with
    # expires_at in the past (the client believes it holds a lease that is already dead)
    try:
        renewal = seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=130)
    except SessionExpired as gone:
        assert gone.reason == "idle"
        return
    assert renewal.expires_at_ms > renewal.now_ms


# -- a stored reply the release before can read -----------------------------------------

# Runs in the release before's code (a checkout of RELEASE_BEFORE's shared/ first on the
# path): the same call with the same request id, answered from the reply this release
# stored, as a rolling deploy's retry on an instance of the release before would be.
REPEAT_IN_RELEASE_BEFORE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from seatlease.seats import redisconn
from seatlease.seats.engine import SeatEngine, SeatRequest
call = json.loads(sys.argv[3])
engine = SeatEngine(redisconn.connect(sys.argv[2]), lambda tenant, license: None)
try:
    if call["op"] == "acquire":
        got = engine.acquire(SeatRequest("t", "lic", call["client"], user=call.get("user"),
                                         request_id=call["request_id"]))
    elif call["op"] == "release":
        engine.release("t", "lic", call["session"])
        got = None
    else:
        got = engine.heartbeat("t", "lic", call["session"], request_id=call["request_id"])
    print(json.dumps({"session_id": got and got.session_id}))
except Exception as error:
    print(json.dumps({"error": type(error).__name__, "text": str(error)}))
"""


@pytest.fixture(scope="module")
def release_before(tmp_path_factory) -> Path:
    """RELEASE_BEFORE's shared/ (git archive), for a subprocess to import."""
    where = tmp_path_factory.mktemp("release_before")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", RELEASE_BEFORE, "shared"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where / "shared"


def repeat_in_release_before(release_before: Path, url: str, **call) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", REPEAT_IN_RELEASE_BEFORE, str(release_before), url,
         json.dumps(call)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_release_before_answers_a_repeat_of_a_shared_acquire(
    redis_url, configs, release_before
):
    eng = SeatEngine(redisconn.connect(redis_url), configs)
    configs.add("t", "lic", seats=1, lease_seconds=30, share="user")
    lease = ask(eng, "ann-1", user="ann", request_id="rq-shared-01")
    assert lease.shared_sessions == 1
    again = repeat_in_release_before(
        release_before, redis_url, op="acquire", client="ann-1", user="ann",
        request_id="rq-shared-01",
    )  # fmt: skip
    assert again == {"session_id": lease.session_id}


@pytest.mark.xfail(
    strict=True,
    reason="heartbeat's stored reply of a warned lease ends in 'i:<ms>': the release "
    "before's named_reply takes it for the weight, and its Python int() raises (why "
    "docs/operations.md turns idle reclaim on only after the rollout)",
)
def test_the_release_before_answers_a_repeat_of_a_warned_heartbeat(
    redis_url, configs, release_before
):
    eng = SeatEngine(redisconn.connect(redis_url), configs)
    configs.add("t", "lic", seats=1, lease_seconds=30, idle_timeout_seconds=60)
    lease = ask(eng, "idle")
    warned = eng.heartbeat(
        "t", "lic", lease.session_id, request_id="rq-warned-01", idle_seconds=120
    )
    assert warned.idle_reclaim_at_ms is not None
    again = repeat_in_release_before(
        release_before, redis_url, op="heartbeat", session=lease.session_id,
        request_id="rq-warned-01",
    )  # fmt: skip
    assert again == {"session_id": lease.session_id}


@pytest.mark.xfail(
    strict=True,
    reason="heartbeat's stored {'idle'} is a code the release before does not know: its "
    "repeat is not a SessionExpired (410) there (docs/operations.md: after the rollout)",
)
def test_the_release_before_answers_a_repeat_of_an_idle_reclaim_as_a_lost_lease(
    redis_url, configs, release_before
):
    eng = SeatEngine(redisconn.connect(redis_url), configs)
    configs.add(
        "t", "lic", seats=1, lease_seconds=3, idle_timeout_seconds=60, idle_reclaim="always"
    )
    lease = ask(eng, "idle")
    warned = eng.heartbeat("t", "lic", lease.session_id, idle_seconds=61)
    time.sleep((warned.idle_reclaim_at_ms - eng.server_time_ms()) / 1000 + 0.05)
    with pytest.raises(SessionExpired):
        eng.heartbeat("t", "lic", lease.session_id, request_id="rq-idle-0001")
    again = repeat_in_release_before(
        release_before, redis_url, op="heartbeat", session=lease.session_id,
        request_id="rq-idle-0001",
    )  # fmt: skip
    assert again.get("error") == "SessionExpired", again


def test_the_harness_control_the_release_before_answers_a_repeat_of_a_plain_acquire(
    redis_url, configs, release_before
):
    """The xfails above fail on the tails, not on the harness: a lease of a license that
    neither shares nor idles, stored by this release, is repeated by the release before."""
    eng = SeatEngine(redisconn.connect(redis_url), configs)
    configs.add("t", "lic", seats=1, lease_seconds=30)
    lease = ask(eng, "plain", request_id="rq-plain-001")
    again = repeat_in_release_before(
        release_before, redis_url, op="acquire", client="plain", request_id="rq-plain-001"
    )
    assert again == {"session_id": lease.session_id}


# -- the warning's cancel, and the idlers index -----------------------------------------


def test_a_warned_leases_activity_heartbeat_is_not_refused_by_the_rate_budget(seat_engine, configs):
    configs.add("t", "lic", seats=1, lease_seconds=30, idle_timeout_seconds=60)
    lease = ask(seat_engine, "idle")
    warned = seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=120)
    assert warned.idle_reclaim_at_ms is not None
    # the tenant is over its budget (1 call/s): another call of it came just now
    with pytest.raises(SessionExpired):
        seat_engine.heartbeat("t", "lic", "no-such-session-000000000", rate_limit=1)
    # the user comes back: the client's touch() heartbeats at once, idle 0
    back = seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=0, rate_limit=1)
    assert back.idle_reclaim_at_ms is None  # actual: TenantRateLimited, still warned


def test_a_warned_lease_taken_back_from_its_linger_is_reclaimed_when_needed(seat_engine, configs):
    """(Reviewed: a release that lingers takes the warning back, as any lingering lease is
    no idle one; taken back and idle again, the lease is warned anew, one interval ahead,
    and when needed reclaimed at that time.)"""
    configs.add("t", "lic", seats=1, lease_seconds=30, linger_seconds=300, idle_timeout_seconds=60)
    lease = ask(seat_engine, "cad")
    seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=120)
    seat_engine.release("t", "lic", lease.session_id)  # lingers (held for its client)
    k = keys.LicenseKeys.of("t", "lic")
    assert seat_engine.redis.zscore(k.idlers, lease.session_id) is None
    with pytest.raises(NoSeatsAvailable):  # a lingering lease is never reclaimed as idle
        ask(seat_engine, "bob")
    assert ask(seat_engine, "cad").session_id == lease.session_id  # taken back
    again = seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=200)
    assert again.idle_reclaim_at_ms is not None and again.idle_reclaim_at_ms > again.now_ms
    assert seat_engine.redis.zscore(k.idlers, lease.session_id) is not None
    warn_passed(seat_engine, lease.session_id)
    assert ask(seat_engine, "bob").created


# -- share_limit changed mid-flight: what status counts ---------------------------------


def test_status_counts_the_seats_the_engine_counts_after_share_limit_changes(seat_engine, configs):
    from seatlease.admin.seats import seats_in_use

    configs.add("t", "lic", seats=3, lease_seconds=30, share="user")  # no limit: one seat
    for i in range(3):
        ask(seat_engine, f"ann-{i}", user="ann")
    configs.add("t", "lic", seats=3, lease_seconds=30, share="user", share_limit=1)
    seat_engine.cache_config("t", "lic", configs("t", "lic"))
    bob = ask(seat_engine, "bob", user="bob")
    assert bob.seats_used == 2  # ann's group's one seat, and bob's
    shown = seats_in_use(seat_engine.live_leases("t", "lic"), share_limit=1)
    assert shown == bob.seats_used  # actual: 4 (over the license's 3: overage_in_use)


@pytest.mark.xfail(
    strict=True,
    reason="the release before's drop_lease knows no share group: a joined session it ends "
    "(its release, its reaper) leaves '#s:' and '#ssum' counting it, and this release's "
    "count then admits a lease past the cap (docs/operations.md: sharing on only after "
    "the rollout)",
)
def test_a_shared_session_ended_by_the_release_before_leaves_the_cap_whole(
    redis_url, configs, release_before
):
    eng = SeatEngine(redisconn.connect(redis_url), configs)
    configs.add("t", "lic", seats=1, lease_seconds=30, share="user")
    ask(eng, "ann-1", user="ann")
    joined = ask(eng, "ann-2", user="ann")
    assert joined.shared_sessions == 2 and joined.seats_used == 1
    # a rolling deploy: an instance of the release before ends ann's second session
    repeat_in_release_before(release_before, redis_url, op="release", session=joined.session_id)
    assert [r["client_id"] for r in eng.live_leases("t", "lic")] == ["ann-1"]
    # ann-1 holds the license's one seat: bob is refused (actual: granted, 2 seats of 1)
    with pytest.raises(NoSeatsAvailable):
        ask(eng, "bob", user="bob")


# -- re-admission by token: a joined session's token ------------------------------------


def test_a_joined_sessions_token_names_its_user_and_brings_it_back_to_its_group(
    seat_engine, configs
):
    from seatlease.seats.values import TokenGrant

    # a policy that judges users (so tokens carry usr), sharing by user, one seat
    configs.add(
        "t",
        "lic",
        seats=1,
        lease_seconds=60,
        share="user",
        policy=policy(deny_users=["mallory"]),
    )
    first = ask(seat_engine, "ann-1", user="ann")
    joined = ask(seat_engine, "ann-2", user="ann")
    assert first.user == "ann" and joined.shared_sessions == 2
    grants = [
        TokenGrant(
            session_id=lease.session_id,
            client_id=lease.client_id,
            expires_at_ms=lease.expires_at_ms,
            issued_at_ms=lease.now_ms,
            user=lease.user,  # the token's usr is the answer's user
        )
        for lease in (first, joined)
    ]
    seat_engine.redis.flushall()  # this Redis lost the data; a failover is under way
    began = seat_engine.server_time_ms()
    back = []
    for grant in grants:
        request = SeatRequest(
            "t", "lic", grant.client_id, recover=grant, user=grant.user,
            lease_seconds=grant.lease_seconds, failover_began_ms=began,
        )  # fmt: skip
        try:
            back.append(seat_engine.readmit(request).session_id)
        except SessionExpired:
            back.append(None)
    # expected: both of ann's sessions back on her one seat; actual: ann-2's token names
    # no user (joined.user is None), it needs a seat of its own, and loses its lease
    assert joined.user == "ann"
    assert back == [first.session_id, joined.session_id]


def test_a_lease_taken_back_from_its_linger_is_not_reclaimed_on_a_warning_it_was_not_told(
    seat_engine, configs
):
    configs.add("t", "lic", seats=1, lease_seconds=30, linger_seconds=300, idle_timeout_seconds=60)
    lease = ask(seat_engine, "cad")
    seat_engine.heartbeat("t", "lic", lease.session_id, idle_seconds=120)  # warned
    seat_engine.release("t", "lic", lease.session_id)  # the user closes the program
    warn_passed(seat_engine, lease.session_id)
    back = ask(seat_engine, "cad")  # ... and opens it again: the seat held for it
    assert back.session_id == lease.session_id and not back.created
    # expected: bob refused (cad's lease came back active; no warning in its answer);
    # actual: bob granted at once, cad's next heartbeat 410 reason idle
    with pytest.raises(NoSeatsAvailable):
        ask(seat_engine, "bob")
