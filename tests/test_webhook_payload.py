"""A lease event as a webhook payload (seatlease.webhooks.payload): the contract's fields,
the event's data untouched, a per-lease ``sequence`` that orders a lease's events (within
one seat call by the event id's counter, across calls by time), and ``EVENT_TYPES`` naming
every event the audit stores plus the alerts and the test event."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import get_args

import pytest

from seatlease.events.audit import EventType, decode_events
from seatlease.webhooks.payload import ALERT_TYPES, EVENT_TYPES, payload_of, sequence_of

ACQUIRED = {
    "event_id": "5d1e0c9a7b3f2468-1",
    "type": "lease.acquired",
    "tenant_id": "demo",
    "license_id": "cad",
    "session_id": "s-1",
    "client_id": "ws-1",
    "occurred_at": "2026-11-29T07:42:56.123Z",
    "seats_used": 3,
    "seats_total": 5,
    "count": 1,
    "seats": 2,
    "metadata": {"user": "ana", "host": "pc-7"},
}
AT_MS = int(datetime(2026, 11, 29, 7, 42, 56, 123000, tzinfo=UTC).timestamp() * 1000)


def test_the_payload_has_the_contracts_fields_and_the_events_data() -> None:
    payload = payload_of(ACQUIRED)
    assert payload == {
        "type": "lease.acquired",
        "id": "5d1e0c9a7b3f2468-1",
        "occurred_at": "2026-11-29T07:42:56.123Z",
        "tenant_id": "demo",
        "license_id": "cad",
        "sequence": AT_MS * 1000 + 1,
        "data": {
            "session_id": "s-1",
            "client_id": "ws-1",
            "seats_used": 3,
            "seats_total": 5,
            "count": 1,
            "seats": 2,
            "metadata": {"user": "ana", "host": "pc-7"},
        },
    }
    json.dumps(payload)  # JSON as it is


def test_the_payload_shares_nothing_with_the_event() -> None:
    event = json.loads(json.dumps(ACQUIRED))
    payload = payload_of(event)
    payload["data"]["metadata"]["user"] = "mallory"
    assert event["metadata"]["user"] == "ana"


def test_an_event_as_the_audit_decodes_it_gives_the_same_payload() -> None:
    # The webhooks function decodes a Pub/Sub message as the audit does: model objects
    # with an aware datetime, which must give the same payload as the JSON.
    [decoded] = decode_events(json.dumps([ACQUIRED]).encode()).events
    assert payload_of(decoded.model_dump()) == payload_of(ACQUIRED)


@pytest.mark.parametrize(
    "at",
    [
        "2026-11-29T07:42:56.123Z",
        "2026-11-29T07:42:56.123+00:00",
        "2026-11-29T08:42:56.123+01:00",
        "2026-11-29T07:42:56.123456Z",
        datetime(2026, 11, 29, 7, 42, 56, 123999, tzinfo=UTC),
        datetime(2026, 11, 29, 2, 42, 56, 123000, tzinfo=timezone(timedelta(hours=-5))),
        datetime(2026, 11, 29, 7, 42, 56, 123000),  # naive, from the database: UTC
    ],
)
def test_occurred_at_in_any_form_becomes_utc_milliseconds(at) -> None:
    payload = payload_of({**ACQUIRED, "occurred_at": at})
    assert payload["occurred_at"] == "2026-11-29T07:42:56.123Z"
    assert payload["sequence"] == AT_MS * 1000 + 1


def test_sequence_orders_a_calls_events_by_counter_and_calls_by_time() -> None:
    one_call = [payload_of({**ACQUIRED, "event_id": f"5d1e0c9a7b3f2468-{n}"}) for n in (1, 2, 3)]
    assert [p["sequence"] for p in one_call] == [AT_MS * 1000 + n for n in (1, 2, 3)]
    later = payload_of(
        {**ACQUIRED, "event_id": "0000aaaa0000aaaa-1", "occurred_at": "2026-11-29T07:42:56.124Z"}
    )
    assert later["sequence"] > max(p["sequence"] for p in one_call)
    # A call of more than 999 events (the reaper's refusal flush) never reaches into the
    # next millisecond.
    assert sequence_of("ffff0000ffff0000-5000", AT_MS) == AT_MS * 1000 + 999
    assert sequence_of("ffff0000ffff0000-5000", AT_MS) < sequence_of("a-1", AT_MS + 1)


def test_an_id_without_a_counter_counts_zero() -> None:
    alert = {
        "event_id": "alert-term_ending-cad-7d",
        "type": "license.term_ending",
        "tenant_id": "demo",
        "license_id": "cad",
        "occurred_at": "2026-11-29T07:42:56.123Z",
        "metadata": {"days": 7},
    }
    payload = payload_of(alert)
    assert payload["sequence"] == AT_MS * 1000
    assert payload["data"] == {"metadata": {"days": 7}}


def test_a_test_event_may_have_no_license() -> None:
    test_event = {"event_id": "test-1", "type": "webhook.test", "tenant_id": "demo"}
    payload = payload_of({**test_event, "occurred_at": "2026-11-29T07:42:56Z"})
    assert payload["license_id"] is None
    assert payload["occurred_at"] == "2026-11-29T07:42:56.000Z"
    assert payload["data"] == {}


def test_the_sequence_stays_exact_in_javascript_numbers() -> None:
    far = int(datetime(2200, 1, 1, tzinfo=UTC).timestamp() * 1000)
    assert sequence_of("x-999", far) < 2**53


@pytest.mark.parametrize("field", ["event_id", "type", "tenant_id", "occurred_at"])
def test_an_event_without_a_needed_field_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match=f"the event has no {field}"):
        payload_of({k: v for k, v in ACQUIRED.items() if k != field})


def test_a_bad_time_is_refused() -> None:
    with pytest.raises(ValueError, match="not an RFC 3339 time"):
        payload_of({**ACQUIRED, "occurred_at": "yesterday"})


def test_event_types_name_every_audited_event_the_alerts_and_the_test() -> None:
    audited = set(get_args(EventType))
    assert audited <= set(EVENT_TYPES)
    assert {"lease.acquired", "lease.released", "lease.reclaimed", "lease.revoked",
            "lease.refused", "lease.recovered", "queue.joined", "queue.left", "queue.granted",
            "license.expiring", "license.expired"} <= audited  # fmt: skip
    assert set(ALERT_TYPES) == {
        "license.nearly_full", "license.capacity_ok", "license.denials", "license.term_ending"
    }  # fmt: skip
    assert set(EVENT_TYPES) == audited | set(ALERT_TYPES) | {"webhook.test"}
    assert len(EVENT_TYPES) == len(set(EVENT_TYPES))
