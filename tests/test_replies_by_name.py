"""Replies by name (seats/protocol/replies.py, lua/_replies.lua): every seat script's
answer reaches Python as ``[code, 'name name ...', value, ...]`` and is decoded by name;
a refusal is one row; the stored form is the one the release before names stored, so
during a rolling deploy each release answers a repeat from the other's stored reply word
for word.

tests/data/stored_replies_v1.json holds replies stored by the scripts of commit 3c4bfca
(before names) for 50 outcomes, with what each first call answered (tests/data/
capture_stored_replies.py). Real redis-server, nothing mocked."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

from seatlease.api.errormap import to_api_error
from seatlease.licenses import LicenseConfig
from seatlease.seats import engine as engine_module
from seatlease.seats.engine import SeatEngine
from seatlease.seats.keys import LicenseKeys
from seatlease.seats.protocol import replies
from seatlease.seats.scripts import helpers_source
from seatlease.seats.values import SeatRequest, TokenGrant

DATA = Path(__file__).parent / "data" / "stored_replies_v1.json"
CASES = json.loads(DATA.read_text())["cases"]
LUA = Path(engine_module.__file__).parent / "lua"


def outcome(run: Any) -> dict[str, Any]:
    """What a call answered, as tests/data/capture_stored_replies.py records it."""
    try:
        value = run()
    except Exception as exc:  # every refusal is compared as it is
        api = to_api_error(exc)
        return {
            "error": type(exc).__name__,
            "message": str(exc),
            "attrs": json.loads(json.dumps(vars(exc), default=str)),
            "http": {"status": api.status, "body": api.body, "headers": api.headers},
        }
    fields = json.loads(json.dumps(dataclasses.asdict(value)))
    # fields the values gained after the capture: a stored reply of before them has none
    for name in ADDED_SINCE:
        assert fields.pop(name, None) is None, name
    return {"value": type(value).__name__, "fields": fields}


# Lease.shared_sessions and Renewal.idle_reclaim_at_ms (idle and shared seats)
ADDED_SINCE = ("shared_sessions", "idle_reclaim_at_ms")


def repeat(engine: SeatEngine, case: dict[str, Any]) -> dict[str, Any]:
    """The case's call made again, with its request id."""
    request = dict(case["request"])
    if case["call"] == "acquire":
        if request["recover"] is not None:
            request["recover"] = TokenGrant(**request["recover"])
        request["entitlements"] = tuple(request["entitlements"])
        return outcome(lambda: engine.acquire(SeatRequest(**request)))
    if case["call"] == "heartbeat":
        return outcome(lambda: engine.heartbeat(**request))
    return outcome(lambda: engine.release(**request))


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_a_reply_stored_by_the_release_before_names_is_answered_word_for_word(
    redis_client, case
) -> None:
    """The stored text written into a fresh Redis under its call's field: the repeat
    answers what the first call answered (the same value, or the same error with the same
    HTTP status, body and headers). The license is not even configured: a repeat is
    answered from the store before anything else is read."""
    keys = LicenseKeys.of(case["request"]["tenant_id"], case["request"]["license_id"])
    hash_key = keys.replies[case["hash"]]
    redis_client.hset(hash_key, case["field"], case["stored"])
    redis_client.pexpire(hash_key, 60_000)
    engine = SeatEngine(redis_client, lambda _tenant, _license: None)
    assert repeat(engine, case) == case["first"]


PACK_AGAIN = """
local reply = unpack_reply(ARGV[1])
return {pack_reply(reply), cjson.encode(named_reply(reply))}
"""


def test_this_release_stores_the_form_the_release_before_reads(redis_client) -> None:
    """Each stored reply of the release before, read and packed again by this release's
    code, is the same text byte for byte: what this release stores for the same answer is
    what the release before reads (its unpack_reply is the one the text was made for)."""
    script = redis_client.register_script(helpers_source() + PACK_AGAIN)
    for case in CASES:
        again, _named = script(args=[case["stored"]])
        assert again == case["stored"], case["case"]


NAME = """
return named_reply(cjson.decode(ARGV[1]))
"""


@pytest.fixture
def name(redis_client):
    script = redis_client.register_script(helpers_source() + NAME)
    return lambda reply: script(args=[json.dumps(reply)])


T = 1_800_000_000_000
LEASE = ["acquired", "sid", T + 360_000, 360_000, 1, 5, 5, T, 0]


@pytest.mark.parametrize(
    ("reply", "named"),
    [
        (LEASE, {}),
        ([*LEASE, 3], {"weight": 3}),
        ([*LEASE, T + 9, T + 10, 1, "cad,sim", "2.0"],
         {"term_expires_ms": T + 9, "term_ends_ms": T + 10, "term_flags": 1,
          "entitlements": "cad,sim", "max_version": "2.0"}),
        ([*LEASE, T + 9, 0, 2, "", "", 4, "m:abcd", "u:zoe", "r:123"],
         {"term_expires_ms": T + 9, "term_ends_ms": 0, "term_flags": 2, "entitlements": "",
          "max_version": "", "weight": 4, "machine": "abcd", "user": "zoe",
          "recovering_until_ms": 123}),
        (["renewed", "sid", T, 60_000, 1, 5, 5, T, 1, "u:m:x"], {"user": "m:x"}),
    ],
)  # fmt: skip
def test_a_lease_answer_names_its_fields_and_each_optional_part(name, reply, named) -> None:
    answer = replies.decode(name(reply))
    base = dict(zip(replies.ANSWERS[reply[0]], reply[1:9], strict=True))
    assert answer.code == reply[0]
    assert answer.fields == {**base, **named}


def test_an_older_stored_reply_short_of_a_field_names_what_it_has(name) -> None:
    """A release long before stored a denial without its held and reserved seats and an
    ok without its client: the fields are absent, and Python takes their defaults."""
    assert name(["denied", 4, 5, 5, 1000]) == [
        "denied", "seats_used seats_total seat_limit retry_ms", 4, 5, 5, 1000,
    ]  # fmt: skip
    denied = replies.decode(name(["denied", 4, 5, 5, 1000]))
    error = replies.REFUSALS["denied"].error(denied, replies.Call("lic", weight=2))
    assert (error.seats_held, error.seats_reserved, error.seats_requested) == (0, 0, 2)
    ok = replies.decode(name(["ok", T + 1, 60_000, T, 0]))
    renewal = replies.renewal_of(ok, replies.Call("lic"), "sid")
    assert renewal.client_id is None and renewal.seats == 1 and renewal.terms is None


def test_an_unknown_code_goes_out_alone_and_python_says_so(name) -> None:
    got = name(["surprise", 1, 2])
    assert got == ["surprise"]
    with pytest.raises(ValueError, match="surprise"):
        replies.lease_of(replies.decode(got), replies.Call("lic"))


def test_a_misspelt_field_is_an_error_not_an_absent_field() -> None:
    answer = replies.decode(["ok", "lease_ms", 1000])
    assert answer.lease_ms == 1000 and answer.client_id is None
    with pytest.raises(AttributeError):
        _ = answer.lease_msec


def codes_returned_by_the_scripts() -> set[str]:
    """Every answer code a seat script (or a helper it runs) writes: a table literal's
    first element (``{'code', ...}``: these files build no other table of strings), or a
    lease's ``status``."""
    codes: set[str] = set()
    for part in ("acquire", "_acquire", "heartbeat", "release", "_policy", "_lib", "_ratelimit"):
        text = (LUA / f"{part}.lua").read_text()
        code = "\n".join(line.split("--")[0] for line in text.splitlines())
        codes |= set(re.findall(r"(?:\{|status = )'([a-z_]+)'", code))
    return codes


def test_every_code_a_script_answers_is_in_the_spec_and_decoded() -> None:
    """The spec names every code the scripts answer; every code is a refusal (one row)
    or one of the answers the engine makes a value of, never both."""
    returned = codes_returned_by_the_scripts()
    assert {"acquired", "denied", "ok", "released", "gone", "queued"} <= returned
    assert returned <= set(replies.ANSWERS), returned - set(replies.ANSWERS)
    values = {"acquired", "renewed", "recovered", "queued", "ok", "released", "gone"}
    assert set(replies.VALUES) == values | {"consult_audit"}
    assert not set(replies.VALUES) & set(replies.REFUSALS)
    assert set(replies.ANSWERS) == set(replies.REFUSALS) | set(replies.VALUES)


def test_the_generated_lua_spec_is_the_python_spec(redis_client) -> None:
    script = redis_client.register_script(
        helpers_source()
        + "local fields, whole, lease, terms, tagged, weight = reply_spec()\n"
        + "return cjson.encode({fields, {}, lease, terms, tagged, weight})"
    )
    fields, _whole, lease, terms, tagged, weight = json.loads(script())
    # (cjson writes an empty table as {})
    assert {k: tuple(v) if v != {} else () for k, v in fields.items()} == replies.ANSWERS
    assert set(lease) == set(replies.LEASE_ANSWERS)
    assert tuple(terms) == replies.TERMS and weight == replies.WEIGHT
    assert [tuple(t) for t in tagged] == list(replies.TAGGED)


def test_the_engine_decodes_no_reply_by_position_or_length() -> None:
    """engine.py reads an answer only by its code and its fields' names, and
    SeatEngine.acquire (with the _acquire it runs) is validate, build, run, decode."""
    source = Path(engine_module.__file__).read_text()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            assert node.value.id not in ("reply", "answer"), ast.unparse(node)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "len":
            assert ast.unparse(node.args[0]) not in ("reply", "answer"), ast.unparse(node)
    for method in (SeatEngine.acquire, SeatEngine._acquire):
        lines = inspect.getsource(method).splitlines()
        assert len(lines) < 40, (method.__name__, len(lines))


def test_a_named_answer_costs_few_bytes_more_on_the_wire(redis_client) -> None:
    """The named answer of a plain grant against its positional form, as RESP on the
    wire: printed for docs/design.md."""
    engine = SeatEngine(redis_client, lambda _t, _l: LicenseConfig(seats=5))
    seen: list[list] = []
    run = engine.scripts.acquire

    def spy(**kwargs: Any) -> list:
        seen.append(run(**kwargs))
        return seen[-1]

    engine.scripts.acquire = spy  # type: ignore[method-assign]
    engine.acquire(SeatRequest("acme", "cad", "laptop-1"))

    def resp(values: list) -> int:
        size = len(f"*{len(values)}\r\n")
        for v in values:
            size += len(f":{v}\r\n") if isinstance(v, int) else len(f"${len(v)}\r\n{v}\r\n")
        return size

    named = seen[-1]
    positional = [named[0], *named[2:]]
    extra = resp(named) - resp(positional)
    print(f"named grant: {resp(named)} bytes, positional {resp(positional)}: +{extra}")
    assert extra < 200
