"""The outbox entry format, written once in lua/_lib.lua (``emit``): each entry is the
published event's JSON text, which the audit function accepts as it is. Run on a private
redis-server."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seatlease.clock import rfc3339
from seatlease.events.audit import decode_events
from seatlease.events.pubsub import encode_messages, outbox_events
from seatlease.seats.scripts import script_source

LIB = script_source("flush_denials").split("\n-- flush_denials.lua", 1)[0]


# The script is stateless: one Redis client for every example is fine.
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(min_value=0, max_value=253_402_300_799_999))  # up to 9999-12-31
def test_lua_rfc3339_matches_python(redis_client, ms: int) -> None:
    lua = redis_client.register_script(LIB + "\nreturn rfc3339(tonumber(ARGV[1]))")
    assert lua(args=[ms]) == rfc3339(ms)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.integers(min_value=0, max_value=253_402_300_799_999), min_size=1, max_size=40),
    st.integers(min_value=-86_400_000, max_value=86_400_000),
)
def test_lua_rfc3339_keeps_no_stale_day(redis_client, times: list[int], step: int) -> None:
    """rfc3339 keeps the last day's text (across the seat library's calls): a run of times
    on the same day, the next day and far apart, in one call, each formatted right."""
    times = [t for m in times for t in (m, min(max(m + step, 0), 253_402_300_799_999), m)]
    lua = redis_client.register_script(
        LIB + "\nlocal out = {} for i, ms in ipairs(ARGV) do out[i] = rfc3339(tonumber(ms)) end"
        "\nreturn out"
    )
    assert lua(args=times) == [rfc3339(ms) for ms in times]


def test_lua_rfc3339_at_calendar_edges(redis_client) -> None:
    lua = redis_client.register_script(LIB + "\nreturn rfc3339(tonumber(ARGV[1]))")
    for text in ("2024-02-29T23:59:59.999", "2100-03-01T00:00:00.000", "2000-12-31T12:00:00.5"):
        from datetime import UTC, datetime

        ms = int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)
        assert lua(args=[ms]) == rfc3339(ms)


def test_emitted_events_are_what_the_audit_function_stores(redis_client) -> None:
    meta = json.dumps({"big": 123456789012345678, "ratio": 0.1 + 0.2, "é": "ü", "n": None})
    emit = redis_client.register_script(
        LIB
        + """
        emit(KEYS[1], 'p', 1764000000123, {type = 'lease.acquired', tenant_id = 't',
          license_id = 'l', session_id = 's', client_id = 'c', seats_used = 1,
          seats_total = 10}, ARGV[1])
        emit(KEYS[1], 'p', 1764000000124, {type = 'lease.denied', tenant_id = 't',
          license_id = 'l', count = 3})
        return 0
        """
    )
    emit(keys=["sl:{0}:outbox-test"], args=[meta])
    acquired, denied = outbox_events(redis_client, "sl:{0}:outbox-test")
    assert acquired == {
        "event_id": "p-1",
        "type": "lease.acquired",
        "tenant_id": "t",
        "license_id": "l",
        "session_id": "s",
        "client_id": "c",
        "occurred_at": "2025-11-24T16:00:00.123Z",
        "seats_used": 1,
        "seats_total": 10,
        "count": 1,
        "metadata": json.loads(meta),  # numbers kept exactly, not rounded by cjson
    }
    assert denied["count"] == 3 and denied["session_id"] is None and denied["metadata"] == {}
    raw = [f["e"] for _id, f in redis_client.xrange("sl:{0}:outbox-test")]
    (message,) = encode_messages(raw)
    decoded = decode_events(message)
    assert decoded.rejected == [] and [e.event_id for e in decoded.events] == ["p-1", "p-2"]
