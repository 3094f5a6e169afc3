"""Usage reports (shared/seatlease/records/reports/) and ``seatlease report usage`` on
crafted lease
events: real PostgreSQL (database_url) and one run of the same checks on SQLite."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text

from seatlease.records import db, event_log, store
from seatlease.records.reports import (
    PeriodUsage,
    Window,
    lease_durations,
    outcomes,
    peak_usage,
    timelines,
    usage_report,
)
from seatlease_cli import main

T = "acme"
DAY = "2026-11-20"


def at(hhmm: str, seconds: int = 0, ms: int = 0) -> datetime:
    hour, minute = map(int, hhmm.split(":"))
    return datetime(2026, 11, 20, hour, minute, seconds, ms * 1000, tzinfo=UTC)


class Events:
    """Crafted events, as the audit function would store them."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, etype: str, when: datetime, license_id: str = "cad", session: str = "",
            client: str = "", used: int | None = None, total: int | None = 3,
            count: int = 1, tenant: str = T) -> None:  # fmt: skip
        self.rows.append(
            {
                "event_id": f"ev-{len(self.rows):04d}",
                "type": etype,
                "tenant_id": tenant,
                "license_id": license_id,
                "session_id": session or None,
                "client_id": client or None,
                "occurred_at": when.isoformat().replace("+00:00", "Z"),
                "seats_used": used,
                "seats_total": None if etype == "lease.denied" else total,
                "count": count,
                "metadata": {},
            }
        )


def scenario() -> Events:
    """License cad (3 seats) and cam (5 seats, raised to 8), 2026-11-20 UTC:

    cad  09:10 +s1(c1) 09:20 +s2(c2) 09:30 +s3(c3) -> 3 | 09:40 -s1 released -> 2
         09:45 reclaimed of an unknown session (its acquire is not in the log): ignored
         09:50 denied x4 | 10:xx nothing (2 carried) | 10:59:59.999 denied x1
         11:15 -s2 reclaimed -> 1 | 11:30 -s3 revoked -> 0
         12:05 +s4(c1), open | 12:30:00.000 +s5(c2) and -s5 released, same ms -> 2, 1
    cam  09:00 +m1(c9) (5 seats) | 10:30 +m2(c8) (8 seats) | 10:45 -m1 released
    other tenant: events that must never show up.
    """
    ev = Events()
    ev.add("lease.acquired", at("09:10"), session="s1", client="c1", used=1)
    ev.add("lease.acquired", at("09:20"), session="s2", client="c2", used=2)
    ev.add("lease.acquired", at("09:30"), session="s3", client="c3", used=3)
    ev.add("lease.released", at("09:40"), session="s1", client="c1", used=2)
    ev.add("lease.reclaimed", at("09:45"), session="ghost", client="c7", used=2)
    ev.add("lease.denied", at("09:50"), count=4)
    ev.add("lease.denied", at("10:59", 59, 999), count=1)
    ev.add("lease.reclaimed", at("11:15"), session="s2", client="c2", used=1)
    ev.add("lease.revoked", at("11:30"), session="s3", client="c3", used=0)
    ev.add("lease.acquired", at("12:05"), session="s4", client="c1", used=1)
    ev.add("lease.acquired", at("12:30"), session="s5", client="c2", used=2)
    ev.add("lease.released", at("12:30"), session="s5", client="c2", used=1)
    ev.add("lease.acquired", at("09:00"), "cam", session="m1", client="c9", used=1, total=5)
    ev.add("lease.acquired", at("10:30"), "cam", session="m2", client="c8", used=2, total=8)
    ev.add("lease.released", at("10:45"), "cam", session="m1", client="c9", used=1, total=8)
    ev.add("lease.acquired", at("09:00"), session="x1", client="c1", tenant="other")
    ev.add("lease.denied", at("09:00"), count=50, tenant="other")
    return ev


def peaks(rows: list[PeriodUsage], license_id: str) -> list[tuple[str, int, int | None, int]]:
    return [
        (r.period_start.strftime("%H:%M"), r.peak_seats, r.seats_total, r.denials)
        for r in rows
        if r.license_id == license_id
    ]


def check_report(engine: Engine | None) -> None:
    """The whole expected report of the scenario; run on PostgreSQL and SQLite."""
    assert event_log.insert_events(scenario().rows, engine) == 17
    everything = Window(T)
    hourly = peak_usage(everything, "hour", engine)
    assert peaks(hourly, "cad") == [
        ("09:00", 3, 3, 4),
        ("10:00", 2, 3, 1),  # no lease event: the level carried through the hour
        ("11:00", 2, 3, 0),  # 2 held when the hour starts, then 1, then 0
        ("12:00", 2, 3, 0),  # s4, then s5 for an instant
    ]
    assert peaks(hourly, "cam") == [
        ("09:00", 1, 5, 0),
        ("10:00", 2, 8, 0),
        ("11:00", 1, 8, 0),  # the tenant's report runs to its last event (12:30)
        ("12:00", 1, 8, 0),
    ]
    daily = peak_usage(everything, "day", engine)
    assert [(r.license_id, r.period_start.date().isoformat(), r.peak_seats, r.denials)
            for r in daily] == [("cad", DAY, 3, 5), ("cam", DAY, 2, 0)]  # fmt: skip

    # A window starting mid-stream starts from the level reached before it.
    later = Window(T, "cad", since=at("10:00"), until=at("12:00"))
    assert peaks(peak_usage(later, "hour", engine), "cad") == [
        ("10:00", 2, 3, 1),
        ("11:00", 2, 3, 0),
    ]
    assert peak_usage(Window(T, "cad", since=at("11:31"), until=at("12:00")), "hour", engine) == []

    durations = {(d.license_id, d.client_id): d for d in lease_durations(everything, engine)}
    c1 = durations[("cad", "c1")]
    assert (c1.leases, c1.total_seconds, c1.max_seconds, c1.open) == (1, 1800.0, 1800.0, 1)
    c2 = durations[("cad", "c2")]  # s2 reclaimed after 6900 s, s5 released after 0 s
    assert (c2.leases, c2.total_seconds, c2.max_seconds, c2.reclaimed) == (2, 6900.0, 6900.0, 1)
    assert c2.average_seconds == 3450.0
    c3 = durations[("cad", "c3")]
    assert (c3.leases, c3.total_seconds, c3.reclaimed, c3.open) == (1, 7200.0, 0, 0)
    assert durations[("cam", "c9")].total_seconds == 6300.0
    assert durations[("cam", "c8")].open == 1
    assert ("cad", "c7") not in durations  # no acquire in the log: not a lease of the window
    cut = {(d.client_id): d for d in lease_durations(Window(T, "cad", until=at("11:00")), engine)}
    # s2 (acquired 09:20) ended after until: it counts with its whole duration; the
    # leases acquired after until do not count.
    assert (cut["c2"].leases, cut["c2"].open, cut["c2"].total_seconds) == (1, 0, 6900.0)
    assert (cut["c1"].leases, cut["c1"].open) == (1, 0)

    ends = {o.license_id: o for o in outcomes(everything, engine)}
    cad = ends["cad"]
    assert (cad.acquired, cad.released, cad.reclaimed, cad.revoked, cad.denials) == (
        5, 2, 2, 1, 5,
    )  # fmt: skip
    assert cad.reclaimed_percent == 40.0
    assert outcomes(Window("nobody"), engine) == []

    # Timelines: one point per period (downsampled on the server), the period's peak.
    lines = {line.license_id: line for line in timelines(later, engine)}
    assert lines["cad"].start_level == 2 and lines["cad"].start_total == 3
    assert [(p[0].strftime("%H:%M"), p[1], p[2]) for p in lines["cad"].points] == [
        ("10:00", 2, 3),
        ("11:00", 2, 3),
    ]
    assert [(t.strftime("%H:%M"), c) for t, c in lines["cad"].denials] == [("10:00", 1)]


def test_report_on_postgres(database_url):
    check_report(None)


def test_report_on_sqlite(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path / 'reports.db'}")
    store.upgrade(engine)
    try:
        check_report(engine)
    finally:
        engine.dispose()


def test_window_rejects_reversed_times():
    with pytest.raises(ValueError, match="since must be before until"):
        Window(T, since=at("10:00"), until=at("09:00"))


# -- the CLI (direct mode: the admin action in-process) ---------------------------------


@pytest.fixture(autouse=True)
def direct_mode(monkeypatch):
    """The CLI runs in-process, never through an admin URL or a ``seatlease local`` that
    happens to run from this folder (a set REDIS_URL turns that detection off; reports do
    not use Redis)."""
    monkeypatch.delenv("SEATLEASE_ADMIN_URL", raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")


@pytest.fixture
def acme_scenario(database_url):
    """Tenant ``acme``, licenses ``cad`` (3 seats) and ``cam`` (5) and the events of
    ``scenario()``, in the database only."""
    store.create_tenant(T)
    store.create_license(T, "cad", 3)
    store.create_license(T, "cam", 5)
    event_log.insert_events(scenario().rows)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["report", "usage", "--tenant", T, *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_table(acme_scenario, capsys):
    code, out, _ = run(capsys, "--license", "cad", "--since", DAY, "--until", "2026-11-21",
                       "--by", "hour")  # fmt: skip
    assert code == 0
    assert "Usage of tenant acme, license cad, 2026-11-20T00:00:00Z to 2026-11-21T00:00:00Z" in out
    assert "Seats in use (peak and average) and denials per hour" in out
    rows = [line.split() for line in out.splitlines()]
    # 09:00: seat time by the log's deltas 50 + 40 + 30 - 20 - 15 minutes = 5100 s
    assert ["cad", "2026-11-20", "09:00", "3", "1.4167", "3", "4"] in rows
    assert ["cad", "2026-11-20", "13:00", "1", "1.0", "3", "0"] in rows
    assert sum(1 for r in rows if r[:2] == ["cad", "2026-11-20"]) == 24  # the whole day
    assert ["cad", "c2", "2", "57m30s", "1h55m", "1h55m", "1", "0", "0"] in rows
    assert "RECLAIMED_PERCENT" in out


def test_cli_json_by_day(acme_scenario, capsys):
    code, out, _ = run(capsys, "--by", "day", "--format", "json")
    assert code == 0
    body = json.loads(out)
    assert body["period"] == "day"
    assert [(u["license_id"], u["peak_seats"], u["denials"]) for u in body["usage"]] == [
        ("cad", 3, 5),
        ("cam", 2, 0),
    ]
    assert body["usage"][0]["period_start"] == "2026-11-20T00:00:00Z"
    assert {o["license_id"]: o["reclaimed_percent"] for o in body["outcomes"]} == {
        "cad": 40.0,
        "cam": 0.0,
    }


def test_cli_json_flag_is_format_json(acme_scenario, capsys):
    code, by_flag, _ = run(capsys, "--license", "cad", "--since", DAY, "--json")
    assert code == 0
    code, by_format, _ = run(capsys, "--license", "cad", "--since", DAY, "--format", "json")
    flag_body, format_body = json.loads(by_flag), json.loads(by_format)
    # (exact steps hold to now: the two runs' timelines end a moment apart)
    assert ("timelines" in flag_body) == ("timelines" in format_body)
    flag_body.pop("timelines", None)
    format_body.pop("timelines", None)
    assert code == 0 and flag_body == format_body
    body = json.loads(by_flag)
    assert (body["license_id"], body["since"], body["until"]) == ("cad", f"{DAY}T00:00:00Z", None)
    expected = usage_report(Window(T, "cad", since=at("00:00")), "auto").as_dict()
    # exact (auto picks it here) carries its steps in the timelines; otherwise none
    assert ("timelines" in body) == (expected["period"] == "exact")
    body.pop("timelines", None)
    assert body == expected  # the report of shared/seatlease/records/reports/, verbatim
    code, _, err = run(capsys, "--json", "--format", "csv")
    assert code == 2 and err == "seatlease: --json conflicts with --format csv\n"
    code, out, _ = run(capsys, "--json", "--section", "outcomes")
    assert code == 0 and "usage" not in json.loads(out) and json.loads(out)["outcomes"]


def test_cli_on_sqlite(tmp_path, capsys, monkeypatch):
    """Direct mode against a SQLite DATABASE_URL (the local stack's default)."""
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'seatlease.db'}")
    db.reset()
    try:
        store.upgrade(db.get_engine())
        store.create_tenant(T)
        store.create_license(T, "cad", 3)
        event_log.insert_events(scenario().rows)
        code, out, err = run(capsys, "--by", "day", "--json", "--chart", str(tmp_path / "u.png"))
    finally:
        db.reset()
    assert code == 0, err
    assert [(u["license_id"], u["peak_seats"], u["denials"]) for u in json.loads(out)["usage"]] == [
        ("cad", 3, 5),
        ("cam", 2, 0),
    ]
    assert (tmp_path / "u.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_csv_sections(acme_scenario, capsys):
    code, out, _ = run(capsys, "--format", "csv", "--section", "durations")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows[0].keys() >= {"client_id", "average_seconds", "max_seconds", "total_seconds"}
    assert {(r["license_id"], r["client_id"], r["total_seconds"]) for r in rows} >= {
        ("cad", "c3", "7200.0")
    }
    code, out, _ = run(capsys, "--format", "csv")
    blocks = out.split("\n\n")
    assert [b.splitlines()[0].split(",")[0:2] for b in blocks] == [
        ["license_id", "period_start"],
        ["license_id", "client_id"],
        ["license_id", "acquired"],
    ]


def test_cli_chart(acme_scenario, capsys, tmp_path):
    chart = tmp_path / "charts" / "usage.png"
    code, out, _ = run(capsys, "--chart", str(chart))
    assert code == 0, out
    data = chart.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # two subplots with lines, markers and labels


def test_cli_errors(acme_scenario, capsys):
    code, _, err = run(capsys, "--license", "nope")
    assert code == 3 and err.strip() == "seatlease: License 'nope' not found for tenant 'acme'"
    code = main(["report", "usage", "--tenant", "ghost"])
    assert code == 3 and capsys.readouterr().err == "seatlease: Tenant 'ghost' not found\n"
    code, _, err = run(capsys, "--since", "2026-11-21", "--until", "2026-11-20")
    assert code == 2 and "since must be before until" in err
    code, _, err = run(
        capsys, "--since", "2026-11-20T10:00:00+01:00", "--until", "2026-11-20T09:00Z"
    )
    assert code == 2 and "since must be before until" in err  # offsets are honoured
    with pytest.raises(SystemExit) as exit_info:
        run(capsys, "--since", "yesterday")
    assert exit_info.value.code == 2
    assert "not an ISO 8601 time" in capsys.readouterr().err


def test_cli_database_down(capsys, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql+pg8000://postgres@127.0.0.1:1/none")
    db.reset()
    try:
        code = main(["report", "usage", "--tenant", T])
    finally:
        db.reset()
    err = capsys.readouterr().err
    assert code == 5 and err.startswith("seatlease: A backend (database) is unavailable")
    assert len(err.strip().splitlines()) == 1 and err[-1] == "\n"


def test_chart_reads_well(acme_scenario, tmp_path):
    """The chart (kept for a look: ``pytest --basetemp``) has one subplot per license."""
    from seatlease_cli.report import draw_chart

    window = Window(T, since=at("08:00"), until=at("14:00"))
    path = Path(tmp_path) / "usage.png"
    draw_chart(timelines(window), window, path)
    assert path.stat().st_size > 20_000
    report = usage_report(window, "hour")
    assert {u.license_id for u in report.usage} == {"cad", "cam"}


# -- rollups against a brute-force model (out of order, redelivered, Redis data lost) ----


BASE = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
SPAN_MS = 5 * 3600 * 1000
ENDING_TYPES = ("lease.released", "lease.reclaimed", "lease.revoked")
STARTS = ("lease.acquired", "lease.borrowed")
# A lease.reclaimed with one of these reasons was ended by the license's term: counted as
# ended_by_term, never as reclaimed; with reason idle (issue 50) by its idle rule:
# ended_by_idle; any other reason (or none) is a crash.
TERM_REASONS = ("license_expired", "license_not_started")
# How a drawn lease ends: an ending type, or a lease.reclaimed with this reason
ENDS = (*ENDING_TYPES, *(f"lease.reclaimed:{r}" for r in (*TERM_REASONS, "idle", "other")))


def _term_end(e: dict) -> bool:
    return e["type"] == "lease.reclaimed" and e["metadata"].get("reason") in TERM_REASONS


def _idle_end(e: dict) -> bool:
    return e["type"] == "lease.reclaimed" and e["metadata"].get("reason") == "idle"


@st.composite
def histories(draw) -> tuple[list[dict], dict[str, int]]:
    """Events as Redis would write them (``seats_used`` = the live leases' weights right
    after), from random leases of weight 1, 2 or 4 on two licenses (a weight-1 lease's
    events sometimes without ``seats``, as written before weights), ended in any way (a
    reclaim with the license's term as its reason too), denials, and maybe one Redis
    data loss per license (its live leases vanish without an ending). Returns
    the events and, per license, the seats of the leases that vanished and were followed
    by a later event of that license."""
    plans = []  # (ms, order, what, details)
    for i in range(draw(st.integers(0, 14))):
        lic = draw(st.sampled_from(["cad", "cam"]))
        start = draw(st.integers(0, SPAN_MS))
        start_type = draw(st.sampled_from(["lease.acquired", "lease.acquired", "lease.borrowed"]))
        client = f"c{draw(st.integers(0, 2))}"
        weight = draw(st.sampled_from([1, 1, 2, 4]))
        plans.append((start, 0, "acquire", (lic, f"s{i}", client, start_type, weight)))
        length = draw(st.none() | st.integers(0, 3 * 3600 * 1000))
        if length is not None:
            plans.append((start + length, 1, "end", (lic, f"s{i}", draw(st.sampled_from(ENDS)))))
    for _ in range(draw(st.integers(0, 3))):
        denial = (draw(st.sampled_from(["cad", "cam"])), draw(st.integers(1, 5)))
        plans.append((draw(st.integers(0, SPAN_MS)), 2, "deny", denial))
    for lic in ("cad", "cam"):
        if draw(st.booleans()):
            plans.append((draw(st.integers(0, SPAN_MS)), 3, "flush", (lic,)))
    plans.sort(key=lambda p: (p[0], p[1]))
    live: dict[str, dict[str, tuple[str, int]]] = {"cad": {}, "cam": {}}  # client, weight
    vanished: dict[str, list[str]] = {"cad": [], "cam": []}
    weights = {p[3][1]: p[3][4] for p in plans if p[2] == "acquire"}
    events: list[dict] = []
    flushed: dict[str, int] = {}
    used_ms: set[int] = set()
    for ms, _order, what, details in plans:
        while ms in used_ms:  # one event per millisecond: same-ms order is unknowable
            ms += 1
        lic = details[0]
        if what == "flush":
            vanished[lic] += list(live[lic])
            live[lic] = {}
            flushed[lic] = ms
            continue
        used_ms.add(ms)
        when = BASE + timedelta(milliseconds=ms)
        weight = None
        if what == "acquire":
            live[lic][details[1]] = (details[2], details[4])
            etype, session, client, count = details[3], details[1], details[2], 1
            weight = details[4]
        elif what == "end":
            if details[1] not in live[lic]:
                continue  # lost with Redis: never ends
            client, weight = live[lic].pop(details[1])
            etype, session, count = details[2], details[1], 1
            etype, _, reason = etype.partition(":")
        else:
            etype, session, client, count = "lease.denied", None, None, details[1]
        if what != "end":
            reason = ""
        denied = etype == "lease.denied"
        events.append({
            "event_id": f"{secrets_hex()}-{len(events)}", "type": etype, "tenant_id": T,
            "license_id": lic, "session_id": session, "client_id": client,
            "occurred_at": when.isoformat().replace("+00:00", "Z"),
            "seats_used": None if denied else sum(w for _c, w in live[lic].values()),
            "seats_total": None if denied else 3, "count": count,
            "metadata": {"reason": reason} if reason else {},
        })  # fmt: skip
        if weight is not None and (weight > 1 or draw(st.booleans())):
            events[-1]["seats"] = weight  # else absent: an event from before weights
    revealed = {}
    for lic, gone in vanished.items():  # only a later event of the license reveals a loss
        after = [e for e in events if e["license_id"] == lic and e["seats_used"] is not None
                 and _when(e) > BASE + timedelta(milliseconds=flushed.get(lic, 0))]  # fmt: skip
        revealed[lic] = sum(weights[session] for session in gone) if after else 0
    return events, revealed


def secrets_hex() -> str:
    import secrets

    return secrets.token_hex(4)


def deliveries(draw, events: list[dict]) -> list[list[dict]]:
    """The events in any order, some twice, in batches of any size (Pub/Sub push)."""
    again = draw(st.lists(st.sampled_from(events), max_size=5)) if events else []
    order = draw(st.permutations(events + again))
    batches, i = [], 0
    while i < len(order):
        size = draw(st.integers(1, 6))
        batches.append(order[i : i + size])
        i += size
    return batches


def _key(e: dict) -> tuple:
    return (_when(e), len(e["event_id"]), e["event_id"])


def _when(e: dict) -> datetime:
    return datetime.fromisoformat(e["occurred_at"])


def model(events: list[dict], window: Window, period: str) -> dict:
    """The report computed straight from the raw events, by its documented rules (``NOW``
    is after every window: nothing is cut at now here)."""
    step = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}[
        period
    ]

    def floor(t: datetime, p: str = period) -> datetime:
        t = t.replace(second=0, microsecond=0)
        if p == "minute":
            return t
        t = t.replace(minute=0)
        return t.replace(hour=0) if p == "day" else t

    since, until = window.since, window.until
    inside = [e for e in events if (not since or _when(e) >= since)
              and (not until or _when(e) < until)]  # fmt: skip
    licenses = sorted({e["license_id"] for e in events})
    if until:
        last = floor(until - timedelta(microseconds=1))
    elif inside:
        last = floor(max(_when(e) for e in inside))
    else:
        last = None
    usage, outcomes = [], {}
    for lic in licenses:
        mine = sorted((e for e in events if e["license_id"] == lic), key=_key)
        before = [e for e in mine if since and _when(e) < since and e["seats_used"] is not None]
        level = before[-1]["seats_used"] if before else 0
        total = before[-1]["seats_total"] if before else None
        own = [e for e in inside if e["license_id"] == lic]
        if last is None or not (own or (since and level > 0)):
            continue
        bucket = floor(since) if since else floor(min(_when(e) for e in own))
        counts = {"acquired": 0, "borrowed": 0, "released": 0, "reclaimed": 0, "revoked": 0,
                  "denials": 0, "lost": 0, "ended_by_term": 0, "ended_by_idle": 0}  # fmt: skip
        while bucket <= last:
            lo = max(bucket, since) if since else bucket
            hi = min(bucket + step, until) if until else bucket + step
            peak, seat_ms, denials, lost = level, 0.0, 0, 0
            hour = lo
            while hour < hi:  # one hour (or the window's part of it) at a time
                h_end = min(floor(hour, "hour") + timedelta(hours=1), hi)
                evs = [e for e in mine if hour <= _when(e) < h_end]
                running, cursor, net = level, hour, 0
                for e in evs:
                    seat_ms += running * (_when(e) - cursor) / timedelta(milliseconds=1)
                    # weighted: a lease moves the level by its seats (1 without)
                    delta = e.get("seats", 1) * (1 if e["type"] in STARTS else (
                        -1 if e["type"] in ENDING_TYPES else 0))  # fmt: skip
                    running += delta
                    net += delta
                    cursor = _when(e)
                    if e["seats_used"] is not None:
                        peak = max(peak, e["seats_used"])
                        total = e["seats_total"]
                    if e["type"] == "lease.denied":
                        denials += e["count"]
                    elif _term_end(e):
                        counts["ended_by_term"] += 1
                    elif _idle_end(e):
                        counts["ended_by_idle"] += 1
                    else:
                        counts[e["type"].split(".")[1]] += 1
                seat_ms += running * (h_end - cursor) / timedelta(milliseconds=1)
                with_used = [e for e in evs if e["seats_used"] is not None]
                after = with_used[-1]["seats_used"] if with_used else max(0, level + net)
                lost += max(0, level + net - after)
                level = after
                hour = h_end
            counts["denials"] += denials
            counts["lost"] += lost
            seconds = round(max(0, seat_ms) / 1000, 3)
            average = round(seconds / (hi - lo).total_seconds(), 4)
            usage.append((lic, bucket, peak, total, denials, seconds, lost, average))
            bucket += step
        if own:
            # crashes among the leases their clients or an operator ended (the term's
            # ends and lost leases in neither part)
            ended = counts["released"] + counts["reclaimed"] + counts["revoked"]
            percent = round(100.0 * counts["reclaimed"] / ended, 1) if ended else None
            outcomes[lic] = {**counts, "reclaimed_percent": percent}
    durations: dict[tuple[str, str], list] = {}
    for e in inside:
        if e["type"] not in STARTS:
            continue
        ends = sorted((x for x in events if x["session_id"] == e["session_id"]
                       and x["type"] in ENDING_TYPES), key=_key)  # fmt: skip
        row = durations.setdefault((e["license_id"], e["client_id"]), [0, 0, 0, None, 0, 0, 0])
        if not ends:
            row[4] += 1
            continue
        ms = (_when(ends[0]) - _when(e)) / timedelta(milliseconds=1)
        row[0] += 1
        row[1] += ms
        row[2] += ends[0]["type"] == "lease.reclaimed" and not (
            _term_end(ends[0]) or _idle_end(ends[0]))  # fmt: skip
        row[3] = ms if row[3] is None else max(row[3], ms)
        row[5] += _term_end(ends[0])
        row[6] += _idle_end(ends[0])
    return {"usage": usage, "outcomes": outcomes, "durations": {
        k: (v[0], round(v[1] / 1000, 3), v[2], None if v[3] is None else round(v[3] / 1000, 3),
            v[4], v[5], v[6]) for k, v in durations.items()}}  # fmt: skip


def reported(window: Window, period: str, engine: Engine | None) -> dict:
    report = usage_report(window, period, engine)
    return {
        "usage": [
            (
                u.license_id,
                u.period_start,
                u.peak_seats,
                u.seats_total,
                u.denials,
                u.seat_seconds,
                u.lost,
                u.average_seats,
            )
            for u in report.usage
        ],
        "outcomes": {
            o.license_id: {
                "acquired": o.acquired,
                "borrowed": o.borrowed,
                "released": o.released,
                "reclaimed": o.reclaimed,
                "revoked": o.revoked,
                "denials": o.denials,
                "lost": o.lost,
                "ended_by_term": o.ended_by_term,
                "ended_by_idle": o.ended_by_idle,
                "reclaimed_percent": o.reclaimed_percent,
            }
            for o in report.outcomes
        },
        "durations": {
            (d.license_id, d.client_id): (
                d.leases,
                d.total_seconds,
                d.reclaimed,
                d.max_seconds,
                d.open,
                d.ended_by_term,
                d.ended_by_idle,
            )
            for d in report.durations
        },
    }


@st.composite
def windows(draw) -> Window:
    since = draw(st.none() | st.integers(-3600_000, SPAN_MS))
    until = draw(st.none() | st.integers(0, SPAN_MS + 4 * 3600_000))
    if since is not None and until is not None and until <= since:
        until = since + 1 + until % 7_200_000
    at_ms = lambda ms: None if ms is None else BASE + timedelta(milliseconds=ms)  # noqa: E731
    return Window(T, None, at_ms(since), at_ms(until))


NOW = BASE + timedelta(days=2)  # after every window, minute rollups still kept


def check_against_model(data, engine: Engine | None, reset) -> None:
    from seatlease import clock

    events, vanished = data.draw(histories())
    reset()
    for batch in deliveries(data.draw, events):
        event_log.insert_events(batch, engine)
    real_now, clock.now = clock.now, lambda: NOW
    try:
        for period in ("minute", "hour", "day"):
            whole = Window(T)
            assert reported(whole, period, engine) == model(events, whole, period)
        window = data.draw(windows())
        period = data.draw(st.sampled_from(["minute", "hour", "day"]))
        assert reported(window, period, engine) == model(events, window, period)
    finally:
        clock.now = real_now
    # Leases lost with Redis are counted (by their seats), once each, when a later event
    # of their license shows Redis's count without them.
    lost = {o.license_id: o.lost for o in outcomes(Window(T), engine)}
    for lic, gone in vanished.items():
        if gone:
            assert lost[lic] == gone


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_rollups_match_the_raw_events_on_sqlite(tmp_path_factory, data):
    engine = db.make_engine(f"sqlite:///{tmp_path_factory.mktemp('h') / 'r.db'}")
    store.upgrade(engine)

    def reset() -> None:
        pass  # a new database per example

    try:
        check_against_model(data, engine, reset)
    finally:
        engine.dispose()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_rollups_match_the_raw_events_on_postgres(database_url, data):
    def reset() -> None:
        with db.get_engine().begin() as conn:
            conn.execute(text("TRUNCATE lease_events, usage_rollups, usage_minute_rollups, "
                              "usage_client_rollups, usage_leases"))  # fmt: skip

    check_against_model(data, None, reset)


def test_leases_lost_with_redis_are_closed_at_the_next_event(database_url):
    """Issue 11: three seats held, Redis loses its data (no ending events), three new
    leases: the report shows 3 of 3 seats (not 6) and says 3 leases were lost."""
    ev = Events()
    for i, hhmm in enumerate(("09:00", "09:01", "09:02")):
        ev.add("lease.acquired", at(hhmm), session=f"old{i}", client=f"c{i}", used=i + 1)
    # Redis lost its data at about 10:00; the old sessions never end.
    for i, hhmm in enumerate(("10:30", "10:31", "10:32")):
        ev.add("lease.acquired", at(hhmm), session=f"new{i}", client=f"c{i}", used=i + 1)
    assert event_log.insert_events(ev.rows) == 6
    report = usage_report(Window(T, "cad", since=at("09:00"), until=at("12:00")), "hour")
    assert [(u.peak_seats, u.lost) for u in report.usage] == [(3, 0), (3, 3), (3, 0)]
    assert report.as_dict()["lost_leases"] == 3
    assert report.outcomes[0].lost == 3
    # 09:00-10:00 three seats (less the first minutes), then 3 until 10:30, then the log
    # follows Redis: 3 more from 10:30 on, closed as lost at the hour's end.
    assert report.usage[2].seat_seconds == 3 * 3600.0


def test_the_current_hour_counts_seat_time_until_now(database_url, monkeypatch):
    """A lease acquired at 12:10 and still held at 12:30 (now): the 12:00 hour has 20
    minutes of seat time so far, not the 50 minutes to the hour's end; an hour wholly
    to come has none."""
    from seatlease import clock

    ev = Events()
    ev.add("lease.acquired", at("11:00"), session="done", client="c0", used=1)
    ev.add("lease.released", at("11:30"), session="done", client="c0", used=0)
    ev.add("lease.acquired", at("12:10"), session="held", client="c1", used=1)
    assert event_log.insert_events(ev.rows) == 3
    monkeypatch.setattr(clock, "now", lambda: at("12:30"))
    for until in (None, at("14:00")):
        report = usage_report(Window(T, "cad", since=at("11:00"), until=until), "hour")
        hours = [(u.period_start.hour, u.peak_seats, u.seat_seconds) for u in report.usage]
        assert hours[:2] == [(11, 1, 1800.0), (12, 1, 1200.0)], until
        assert all(seconds == 0 for _hour, _peak, seconds in hours[2:]), hours
