"""The seat protocol (seats/protocol/calls.py): each script's KEYS and ARGV are named in one
spec, the Python side builds a call's lists from those names, and the generated Lua binding
gives the script the same names (``k.leases``, ``a.tenant_id``). Checked here: the spec,
the binding and each script's use of names agree; no Lua file indexes KEYS or ARGV itself;
the builders refuse a missing or unknown name; and calls made through them run on a real
redis-server."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from seatlease.seats.engine import SeatRequest
from seatlease.seats.keys import LicenseKeys, deadlines_key, outbox_key, ticket_index_key
from seatlease.seats.protocol.calls import (
    SPECS,
    ProtocolError,
    ScriptSpec,
    Tail,
    acquire_call,
    heartbeat_call,
    index_batch,
    reclaim_call,
    release_call,
    sweep_tickets_call,
)
from seatlease.seats.scripts import (
    LIBRARY_SCRIPTS,
    PRELUDES,
    SCRIPT_NAMES,
    SeatScripts,
    library_code,
    script_source,
)
from seatlease.seats.values import Lease

LUA = resources.files("seatlease.seats") / "lua"


def lua(name: str) -> str:
    return (LUA / f"{name}.lua").read_text()


def code(text: str) -> str:
    """Lua without its comments (``--`` to the end of the line)."""
    return re.sub(r"--[^\n]*", "", text)


def fields_of(table: str, text: str) -> set[str]:
    """The names read or written as ``<table>.<name>`` (or ``C.<table>.<name>``, the
    call's state of acquire's steps) in ``text``."""
    return set(re.findall(rf"(?:(?<![\w.])|(?<![\w.])C\.){table}\.([A-Za-z_]\w*)", text))


def assigned(table: str, text: str) -> set[str]:
    """The names a script sets itself (``k.lk = ...``): its own, not the protocol's."""
    return set(re.findall(rf"(?<![\w.]){table}\.([A-Za-z_]\w*)\s*=(?!=)", text))


def own_code(name: str) -> str:
    """A script's own code: its file, and its steps' prelude (``_<name>.lua``) if it has
    one (acquire's), without comments."""
    steps = f"_{name}"
    return code(lua(name)) + (code(lua(steps)) if steps in PRELUDES.get(name, ()) else "")


def test_every_script_has_a_spec_and_every_spec_a_script() -> None:
    assert set(SPECS) == set(SCRIPT_NAMES)
    for name, spec in SPECS.items():
        assert spec.name == name
        for names in (spec.keys, spec.args):
            assert len(set(names)) == len(names), (name, names)
        for tail in (spec.key_tail, spec.arg_tail):
            if tail is not None:
                assert len(set(tail.fields)) == len(tail.fields), (name, tail)
                assert tail.name not in spec.keys + spec.args, (name, tail.name)


@pytest.mark.parametrize("path", sorted(p.name for p in LUA.iterdir() if p.name.endswith(".lua")))
def test_no_lua_file_indexes_keys_or_argv(path: str) -> None:
    """Every .lua file (scripts and helpers) reads its call's KEYS and ARGV by name only:
    neither ``KEYS[...]``/``ARGV[...]`` nor their lengths, in code or in comments."""
    text = (LUA / path).read_text()
    assert not re.search(r"\b(KEYS|ARGV)\s*\[", text), path
    assert not re.search(r"#\s*(KEYS|ARGV)\b", text), path


@pytest.mark.parametrize("name", sorted(SPECS))
def test_a_script_uses_exactly_the_names_its_spec_declares(name: str) -> None:
    spec = SPECS[name]
    own = own_code(name)
    helpers = "".join(code(lua(p)) for p in ("_lib", *PRELUDES.get(name, ())))
    key_names = set(spec.keys) | ({spec.key_tail.name} if spec.key_tail else set())
    arg_names = set(spec.args) | ({spec.arg_tail.name} if spec.arg_tail else set())
    # every name the script reads is declared (or one it sets on k itself)
    assert fields_of("k", own) - assigned("k", own) <= key_names, name
    assert fields_of("a", own) <= arg_names, name
    # every declared name is read: args by the script, keys by it or the helpers it passes
    # k to
    assert key_names <= fields_of("k", own + helpers), name
    assert arg_names <= fields_of("a", own), name
    # a tail's fields too (records are often held in a local: read as .<field>)
    for tail, where in ((spec.key_tail, own + helpers), (spec.arg_tail, own)):
        if tail is not None and len(tail.fields) > 1:
            used = set(re.findall(r"\.([A-Za-z_]\w*)", where))
            assert set(tail.fields) <= used, (name, tail)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_binding_follows_the_spec_and_comes_right_after_begin_call(name: str) -> None:
    binding = SPECS[name].lua_binding()
    assert "begin_call()\n" + binding + lua(name) in script_source(name)
    if name in LIBRARY_SCRIPTS:
        assert "begin_call()\n" + binding + lua(name) in library_code()[1]


def sample(spec: ScriptSpec, tails: int) -> tuple[dict, dict]:
    """Distinct values for every name of ``spec``, each tail ``tails`` records long."""

    def values(prefix: str, names: tuple[str, ...], tail: Tail | None) -> dict:
        out: dict = {n: f"{prefix}:{n}" for n in names}
        if tail is not None:
            if len(tail.fields) == 1:
                out[tail.name] = [f"{prefix}:{tail.name}:{i}" for i in range(tails)]
            else:
                out[tail.name] = [
                    {f: f"{prefix}:{tail.name}:{i}:{f}" for f in tail.fields} for i in range(tails)
                ]
        return out

    return values("k", spec.keys, spec.key_tail), values("a", spec.args, spec.arg_tail)


@pytest.mark.parametrize(
    ("name", "tails"),
    [(name, 0) for name in sorted(SPECS)]
    + [
        (name, 3)
        for name in sorted(SPECS)
        if SPECS[name].key_tail is not None or SPECS[name].arg_tail is not None
    ],
)
def test_the_binding_gives_the_script_what_the_builder_was_given(
    name: str, tails: int, redis_client
) -> None:
    """Built by name in Python, read by name in Lua: the same values, tails record by
    record (a real redis-server runs the generated binding), for every script, and with
    three records for each that takes a tail."""
    spec = SPECS[name]
    keys, args = sample(spec, tails)
    key_list, arg_list = spec.build(keys, args)
    # cjson writes an empty table as {}: a tail of none is compared as such
    probe = spec.lua_binding() + "return cjson.encode({k = k, a = a})"
    seen = json.loads(redis_client.eval(probe, len(key_list), *key_list, *arg_list))
    empty = {t.name: {} for t in (spec.key_tail, spec.arg_tail) if t is not None and not tails}
    assert seen["k"] == {**keys, **{n: v for n, v in empty.items() if n in keys}}
    assert seen["a"] == {**args, **{n: v for n, v in empty.items() if n in args}}


def test_the_builder_refuses_a_missing_or_unknown_name() -> None:
    spec = SPECS["heartbeat"]
    keys, args = sample(spec, 0)
    spec.build(keys, args)  # complete: fine
    missing = {n: v for n, v in keys.items() if n != "rate"}
    with pytest.raises(ProtocolError, match=r"heartbeat\.lua KEYS: missing \['rate'\]"):
        spec.build(missing, args)
    with pytest.raises(ProtocolError, match=r"heartbeat\.lua ARGV: .*unknown \['usr'\]"):
        spec.build(keys, {**args, "usr": "x"})
    tailed = SPECS["reclaim"]
    keys, args = sample(tailed, 2)
    keys["candidates"][1].pop("wsum")
    with pytest.raises(ProtocolError, match=r"reclaim\.lua KEYS candidates: a record has"):
        tailed.build(keys, args)


def test_the_call_builders_put_each_name_where_the_spec_says() -> None:
    """acquire_call and the others keep their signatures; their lists are the spec's."""
    keys = LicenseKeys.of("acme", "cad")
    ks, av = acquire_call("acme", "cad", "laptop-1", request_id="r", user="ann", seats=3)
    spec = SPECS["acquire"]
    at = {n: i for i, n in enumerate(spec.keys)}
    assert ks[at["leases"]] == keys.leases and ks[at["rate"]] == keys.rate
    assert ks[at["reply0"]], ks[at["reply1"]] == keys.replies
    named = dict(zip(spec.args, av, strict=True))
    assert (named["client_id"], named["user"], named["seats"]) == ("laptop-1", "ann", 3)
    ks, av = heartbeat_call("acme", "cad", "s1", request_id="r")
    assert dict(zip(SPECS["heartbeat"].args, av, strict=True))["session_id"] == "s1"
    ks, av = release_call("acme", "cad", "s1", request_id="r", revoke=True)
    assert dict(zip(SPECS["release"].args, av, strict=True))["event_type"] == "lease.revoked"
    assert len(ks) == len(SPECS["release"].keys)


# Index members whose ids use every character the key layout allows (seats/keys.py:
# A-Z a-z 0-9 . _ : @ -), one license twice, and one id that is a prefix of another
BATCH_MEMBERS = [
    "acme/cad|s-1",
    "Ac.me_2:x@y-z/L.i_c:3@e-n|Ses.s_i:o@n-9",
    "acme/cad|s-2",
    "a/b|c",
    "t-0.@:_/l-0.@:_|-.@:_0",
    "acme/cad.x|s-1",
]


def test_the_reapers_batch_calls_are_what_the_spec_builds() -> None:
    """reclaim_call and sweep_tickets_call skip ScriptSpec.build for speed (a crash wave is
    a million candidates): their lists equal the named build's for the same members, each
    record's keys named here from LicenseKeys, so an order changed in the spec, or a
    name mapped to the wrong key, fails this test."""
    reclaim_keys, reclaim_args, sweep_keys, sweep_args = [], [], [], []
    for member in BATCH_MEMBERS:
        lk, _, rest = member.partition("|")
        tenant_id, _, license_id = lk.partition("/")
        lic = LicenseKeys.of(tenant_id, license_id)
        reclaim_keys.append(
            {
                "leases": lic.leases,
                "sessions": lic.sessions,
                "clients": lic.clients,
                "cfg": lic.cfg,
                "users": lic.users,
                "units": lic.units,
                "wsum": lic.wsum,
                "queue": lic.queue,
                "tickets": lic.tickets,
                "tdl": lic.ticket_deadlines,
                "ended": lic.ended,
                "idlers": lic.idlers,
            }
        )
        ids = {"tenant_id": tenant_id, "license_id": license_id}
        reclaim_args.append({**ids, "session_id": rest})
        sweep_keys.append({"queue": lic.queue, "tickets": lic.tickets, "tdl": lic.ticket_deadlines})
        sweep_args.append({**ids, "client_id": rest})
    assert reclaim_args[1] == {
        "tenant_id": "Ac.me_2:x@y-z",
        "license_id": "L.i_c:3@e-n",
        "session_id": "Ses.s_i:o@n-9",
    }
    shard_keys = {"outbox": outbox_key(7), "tix": ticket_index_key(7)}
    expected = SPECS["reclaim"].build(
        {"deadlines": deadlines_key(7), **shard_keys, "candidates": reclaim_keys},
        {"event_prefix": "ev-1", "candidates": reclaim_args},
    )
    assert reclaim_call(7, BATCH_MEMBERS, "ev-1") == expected
    assert reclaim_call(7, iter(BATCH_MEMBERS), "ev-1") == expected  # any iterable
    assert len(expected[0]) == 3 + 12 * len(BATCH_MEMBERS)
    expected = SPECS["sweep_tickets"].build(
        {**shard_keys, "candidates": sweep_keys},
        {"event_prefix": "ev-2", "candidates": sweep_args},
    )
    assert sweep_tickets_call(7, BATCH_MEMBERS, "ev-2") == expected
    assert reclaim_call(7, [], "ev-3") == SPECS["reclaim"].build(
        {"deadlines": deadlines_key(7), **shard_keys, "candidates": []},
        {"event_prefix": "ev-3", "candidates": []},
    )
    assert len(expected[1]) == 1 + 3 * len(BATCH_MEMBERS)


def test_a_batch_call_follows_a_spec_in_another_order() -> None:
    """index_batch reads the order from whatever spec it is given: records in another
    order (the arguments too, which the seat scripts' own order never exercises) come out
    as that spec's build puts them; a spec that is no batch over index members is
    refused."""
    spec = ScriptSpec(
        "shuffled",
        keys=("tix", "deadlines"),
        args=("event_prefix",),
        key_tail=Tail("candidates", ("ended", "cfg", "tdl")),
        arg_tail=Tail("candidates", ("session_id", "tenant_id", "license_id")),
    )
    keys, args = [], []
    for member in BATCH_MEMBERS:
        lk, _, rest = member.partition("|")
        tenant_id, _, license_id = lk.partition("/")
        lic = LicenseKeys.of(tenant_id, license_id)
        keys.append({"ended": lic.ended, "cfg": lic.cfg, "tdl": lic.ticket_deadlines})
        args.append({"session_id": rest, "tenant_id": tenant_id, "license_id": license_id})
    expected = spec.build(
        {"tix": ticket_index_key(4), "deadlines": deadlines_key(4), "candidates": keys},
        {"event_prefix": "ev", "candidates": args},
    )
    assert index_batch(spec, "session_id")(4, BATCH_MEMBERS, "ev") == expected
    with pytest.raises(ProtocolError, match=r"shuffled\.lua: not a batch"):
        index_batch(spec, "client_id")
    with pytest.raises(ProtocolError, match=r"heartbeat\.lua: not a batch"):
        index_batch(SPECS["heartbeat"], "session_id")


def test_a_call_built_by_name_runs_on_redis(engine, configs, redis_client) -> None:
    """The library's functions and the EVALSHA scripts read the named arguments: a lease
    taken, renewed (by FCALL, then by EVALSHA: a server without functions runs that) and
    released through the builders, each call's effect seen in Redis itself."""
    configs.add("acme", "proto", seats=2)
    lease = engine.acquire(SeatRequest("acme", "proto", "laptop-1"))
    assert isinstance(lease, Lease) and lease.seats_used == 1
    keys = LicenseKeys.of("acme", "proto")
    scripts = SeatScripts(redis_client)
    for n, call in enumerate([scripts.heartbeat, scripts.library.script("heartbeat")]):
        seconds, micros = redis_client.time()
        soon = seconds * 1000 + micros // 1000 + 5000  # as if the lease were nearly over
        redis_client.zadd(keys.leases, {lease.session_id: soon}, xx=True)
        ks, av = heartbeat_call("acme", "proto", lease.session_id, request_id=f"hb-{n}")
        call(keys=ks, args=av)
        assert redis_client.zscore(keys.leases, lease.session_id) > soon  # extended
    ks, av = release_call("acme", "proto", lease.session_id, request_id="rel-1")
    scripts.release(keys=ks, args=av)
    assert redis_client.zcard(keys.leases) == 0
    assert redis_client.hget(keys.sessions, lease.session_id) is None
