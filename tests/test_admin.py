"""The ``admin`` function: through its functions-framework test client, and behind a real
HTTP server (seatlease_cli.devserver on a free port) driven by the CLI in URL mode. Real
PostgreSQL and redis-server underneath."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import functions_framework
import pytest
from http_support import revoked_in_shard, serving

import seatlease_cli as cli
from seatlease.api import auth
from seatlease.records import db, event_log, reports, store
from seatlease.seats import keys, redisconn
from seatlease_cli import backend, devserver
from seatlease_cli.procs import free_port

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def functions():
    return {
        name: functions_framework.create_app(
            name, str(REPO / "functions" / name / "main.py")
        ).test_client()
        for name in ("admin", "acquire", "heartbeat")
    }


def post(functions, action: str, **fields):
    return functions["admin"].post("/", json={"action": action, **fields})


def seed(functions, seats: int = 2) -> str:
    """Tenant acme with license cad; returns an API key."""
    assert post(functions, "tenant.create", tenant_id="acme").status_code == 201
    made = post(functions, "license.create", tenant_id="acme", license_id="cad", seats=seats)
    assert made.status_code == 201, made.json
    return post(functions, "apikey.create", tenant_id="acme").json["key"]


def acquire(functions, key: str, client_id: str, **extra):
    return functions["acquire"].post(
        "/",
        json={"license_id": "cad", "client_id": client_id, **extra},
        headers={"Authorization": f"Bearer {key}"},
    )


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    error = response.json["error"]
    assert error["code"] == code and error["message"]
    return error


# -- the function, through its test client ---------------------------------------------


def test_actions_end_to_end(stack, functions, redis_client):
    created = post(functions, "tenant.create", tenant_id="acme", name="Acme Corp")
    assert created.status_code == 201
    assert created.json["tenant"]["name"] == "Acme Corp"
    assert post(functions, "tenant.list").json["tenants"][0]["tenant_id"] == "acme"

    lic = post(
        functions,
        "license.create",
        tenant_id="acme",
        license_id="cad",
        seats=2,
        overage_percent=50,
        lease_seconds=60,
    )
    assert lic.status_code == 201
    assert lic.json["cache_refreshed"] is True
    assert lic.json["license"]["seat_limit"] == 3
    assert redis_client.hget(keys.LicenseKeys.of("acme", "cad").cfg, "seats") == "2"

    new_key = post(functions, "apikey.create", tenant_id="acme", label="ci")
    assert new_key.status_code == 201
    key = new_key.json["key"]
    listed = post(functions, "apikey.list", tenant_id="acme").json["api_keys"]
    assert [(k["prefix"], k["label"], k["active"]) for k in listed] == [
        (new_key.json["prefix"], "ci", True)
    ]

    lease = acquire(functions, key, "ws1", metadata={"user": "alice", "host": "ws1"})
    assert lease.status_code == 201
    status = post(functions, "status", tenant_id="acme")
    assert status.status_code == 200
    (entry,) = status.json["licenses"]
    assert (entry["seats_used"], entry["seats"], entry["seat_limit"]) == (1, 2, 3)
    assert entry["suspended"] is False
    (held,) = entry["leases"]
    assert held["session_id"] == lease.json["session_id"]
    assert (held["user"], held["host"], held["client_id"]) == ("alice", "ws1", "ws1")
    assert 55 <= held["expires_in_seconds"] <= 60

    shrunk = post(functions, "license.update", tenant_id="acme", license_id="cad", seats=1)
    assert shrunk.status_code == 200 and shrunk.json["license"]["seats"] == 1
    # Limit now 1 (1 seat + 50 %, rounded down), visible to the very next acquire.
    assert_error(acquire(functions, key, "ws2"), 409, "no_seats_available")

    suspended = post(functions, "license.suspend", tenant_id="acme", license_id="cad")
    assert suspended.json["license"]["suspended"] is True
    assert_error(acquire(functions, key, "ws4"), 403, "license_suspended")
    resumed = post(functions, "license.resume", tenant_id="acme", license_id="cad")
    assert resumed.json["license"]["suspended"] is False
    shown = post(functions, "license.show", tenant_id="acme", license_id="cad")
    assert shown.json["license"]["suspended"] is False
    assert len(post(functions, "license.list").json["licenses"]) == 1

    revoked = post(
        functions,
        "revoke",
        tenant_id="acme",
        license_id="cad",
        session_id=lease.json["session_id"],
    )
    assert revoked.status_code == 200
    assert revoked.json["revoked"] is True and revoked.json["user"] == "alice"
    assert revoked.json["seats_used"] == 0
    beat = functions["heartbeat"].post(
        "/",
        json={"license_id": "cad", "session_id": lease.json["session_id"]},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert assert_error(beat, 410, "session_expired")["reason"] == "revoked"  # its client learns it
    again = post(
        functions,
        "revoke",
        tenant_id="acme",
        license_id="cad",
        session_id=lease.json["session_id"],
    )
    assert_error(again, 404, "session_not_found")

    gone = post(functions, "apikey.revoke", prefix=new_key.json["prefix"])
    assert gone.status_code == 200 and gone.json["local_cache_seconds"] == auth.LOCAL_TTL
    assert_error(acquire(functions, key, "ws5"), 401, "unauthenticated")


def test_status_gives_each_lease_and_ticket_its_seats(stack, functions):
    """A lease of 4 seats and two plain ones on 4 seats (+50 % overage: 6): ``seats_used``
    is the weights' sum (6, over the 4 seats: overage in use), each lease has its
    ``seats``; of the two clients then queued, one waits for 3 seats and says so."""
    from seatlease.api import runtime
    from seatlease.seats.engine import SeatRequest

    store.create_tenant("acme")
    store.create_license("acme", "cad", seats=4, overage_percent=50, policy={"queue": True})
    runtime.refresh_license_cache("acme", "cad")
    engine = runtime.seat_engine()
    engine.acquire(SeatRequest("acme", "cad", "ws1"))
    (entry,) = post(functions, "status", tenant_id="acme").json["licenses"]
    assert (entry["seats_used"], entry["overage_in_use"]) == (1, False)
    assert [lease["seats"] for lease in entry["leases"]] == [1]

    assert engine.acquire(SeatRequest("acme", "cad", "render-1", seats=4)).seats == 4
    engine.acquire(SeatRequest("acme", "cad", "ws2"))
    assert engine.acquire(SeatRequest("acme", "cad", "render-2", seats=3, queue=True)).seats == 3
    engine.acquire(SeatRequest("acme", "cad", "ws3", queue=True))
    (entry,) = post(functions, "status", tenant_id="acme", license_id="cad").json["licenses"]
    assert (entry["seats_used"], entry["overage_in_use"]) == (6, True)
    weights = {lease["client_id"]: lease["seats"] for lease in entry["leases"]}
    assert weights == {"render-1": 4, "ws1": 1, "ws2": 1}
    assert [(t["client_id"], t["seats"]) for t in entry["queue"]] == [("render-2", 3), ("ws3", 1)]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action": "tenant.create"}, "tenant_id"),
        ({"action": "tenant.create", "tenant_id": "a b"}, "tenant_id"),
        ({"action": "tenant.create", "tenant_id": "acme", "colour": "red"}, "colour"),
        ({"action": "license.create", "tenant_id": "a", "license_id": "b", "seats": "5"}, "seats"),
        ({"action": "license.create", "tenant_id": "a", "license_id": "b", "seats": -1}, "seats"),
        (
            {"action": "license.update", "tenant_id": "a", "license_id": "b", "suspended": 1},
            "suspended",
        ),
        ({"action": "apikey.revoke", "prefix": "sl_XYZ"}, "prefix"),
        (
            {"action": "revoke", "tenant_id": "a", "license_id": "b", "session_id": "s 1"},
            "session_id",
        ),
    ],
)
def test_invalid_requests_name_the_field(stack, functions, body, field):
    response = functions["admin"].post("/", json=body)
    error = assert_error(response, 400, "invalid_request")
    assert field in {d["field"] for d in error["details"]}
    assert field in error["message"]


@pytest.mark.parametrize(
    "lease",
    [{}, {"session_id": "s1", "client_id": "ws1"}],
    ids=["neither", "both"],
)
def test_revoke_names_one_lease(stack, functions, lease):
    """A rule on two fields is the body's: the message names both, as the choice to make."""
    body = {"action": "revoke", "tenant_id": "a", "license_id": "b", **lease}
    error = assert_error(functions["admin"].post("/", json=body), 400, "invalid_request")
    assert [d["field"] for d in error["details"]] == ["body"]
    assert "session_id" in error["message"] and "client_id" in error["message"]


def test_http_level_errors(stack, functions):
    got = functions["admin"].get("/")
    assert_error(got, 405, "method_not_allowed")
    assert got.headers["Allow"] == "POST"
    assert_error(
        functions["admin"].post("/", data="{}", content_type="text/plain"),
        415,
        "unsupported_media_type",
    )
    assert_error(
        functions["admin"].post("/", data="{nope", content_type="application/json"),
        400,
        "invalid_request",
    )
    assert_error(functions["admin"].post("/", json=[1, 2]), 400, "invalid_request")
    nested = functions["admin"].post("/", data="[" * 5000, content_type="application/json")
    assert "nested too deeply" in assert_error(nested, 400, "invalid_request")["message"]
    # An identity token whose payload is nested JSON: the caller is unknown, not a 500.
    deep = base64.urlsafe_b64encode(b"[" * 5000).decode().rstrip("=")
    anonymous = functions["admin"].post(
        "/", json={"action": "tenant.list"}, headers={"Authorization": f"Bearer x.{deep}.y"}
    )
    assert anonymous.status_code == 200, anonymous.json
    unknown = assert_error(post(functions, "tenant.delete"), 400, "invalid_request")
    assert "status" in unknown["actions"]
    assert_error(functions["admin"].post("/", json={}), 400, "invalid_request")


def test_domain_errors(stack, functions):
    seed(functions)
    assert_error(post(functions, "tenant.create", tenant_id="acme"), 409, "conflict")
    assert_error(
        post(functions, "license.create", tenant_id="acme", license_id="cad", seats=1),
        409,
        "conflict",
    )
    assert_error(post(functions, "apikey.create", tenant_id="nobody"), 404, "not_found")
    assert_error(post(functions, "license.list", tenant_id="nobody"), 404, "not_found")
    assert_error(post(functions, "status", tenant_id="acme", license_id="x"), 404, "not_found")
    assert_error(post(functions, "apikey.revoke", prefix="sl_00000000"), 404, "not_found")
    error = assert_error(
        post(
            functions,
            "license.update",
            tenant_id="acme",
            license_id="cad",
            lease_seconds=4000,
        ),
        400,
        "invalid_request",
    )
    assert "max_lease_seconds" in error["message"]
    assert store.get_license("acme", "cad")["lease_seconds"] == 360


def test_backends_down(stack, functions, monkeypatch):
    seed(functions)
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    redisconn.reset()
    stale = post(functions, "license.update", tenant_id="acme", license_id="cad", seats=7)
    assert stale.status_code == 200
    assert stale.json["cache_refreshed"] is False and "600 s" in stale.json["warning"]
    assert store.get_license("acme", "cad")["seats"] == 7
    down = post(functions, "status")
    assert_error(down, 503, "backend_unavailable")
    assert down.headers["Retry-After"]

    monkeypatch.setenv("DATABASE_URL", f"postgresql://postgres@127.0.0.1:{free_port()}/x")
    db.reset()
    down = post(functions, "tenant.list")
    assert_error(down, 503, "backend_unavailable")
    assert int(down.headers["Retry-After"]) >= 1


def test_log_line_names_the_caller_never_the_key(stack, functions, capsys):
    payload = base64.urlsafe_b64encode(json.dumps({"email": "ops@example.com"}).encode())
    token = "e30." + payload.decode().rstrip("=") + ".sig"
    made = functions["admin"].post(
        "/",
        json={"action": "tenant.create", "tenant_id": "acme"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert made.status_code == 201
    key = functions["admin"].post("/", json={"action": "apikey.create", "tenant_id": "acme"})
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    first, second = (line for line in lines if line.get("function") == "admin")
    assert first["caller"] == "ops@example.com" and first["action"] == "tenant.create"
    assert first["status"] == 201 and first["tenant_id"] == "acme"
    assert second["caller"] is None
    assert key.json["key"] not in json.dumps(lines)


def lease_events(tenant: str = "acme", license_id: str = "cad") -> list[dict]:
    """A morning of crafted audit events on a 2-seat license, as the audit function
    stores them: s1 09:10-09:40 released, s2 09:20-10:15 reclaimed, s3 09:30 still open,
    3 denials at 09:50."""
    rows = []

    def add(etype: str, hhmm: str, session: str | None, used: int | None, count: int = 1):
        hour, minute = map(int, hhmm.split(":"))
        rows.append(
            {
                "event_id": f"{tenant}-{license_id}-{len(rows)}",
                "type": etype,
                "tenant_id": tenant,
                "license_id": license_id,
                "session_id": session,
                "client_id": session and f"ws-{session}",
                "occurred_at": f"2026-11-20T{hour:02d}:{minute:02d}:00Z",
                "seats_used": used,
                "seats_total": None if etype == "lease.denied" else 2,
                "count": count,
                "metadata": {},
            }
        )

    add("lease.acquired", "09:10", "s1", 1)
    add("lease.acquired", "09:20", "s2", 2)
    add("lease.released", "09:40", "s1", 1)
    add("lease.acquired", "09:45", "s3", 2)
    add("lease.denied", "09:50", None, None, count=3)
    add("lease.reclaimed", "10:15", "s2", 1)
    return rows


def test_report_usage_action(stack, functions):
    seed(functions)
    assert event_log.insert_events(lease_events()) == 6
    fields = {"tenant_id": "acme", "since": "2026-11-20T09:00:00Z", "until": "2026-11-20T11:00Z"}
    got = post(functions, "report.usage", period="hour", **fields)
    assert got.status_code == 200, got.json
    window = reports.Window(
        "acme", None, datetime(2026, 11, 20, 9, tzinfo=UTC), datetime(2026, 11, 20, 11, tzinfo=UTC)
    )
    assert (
        got.json == reports.usage_report(window, "hour").as_dict()
    )  # shared/seatlease/records/reports/'s
    assert [(u["period_start"], u["peak_seats"], u["denials"]) for u in got.json["usage"]] == [
        ("2026-11-20T09:00:00Z", 2, 3),
        ("2026-11-20T10:00:00Z", 2, 0),
    ]
    assert "timelines" not in got.json

    daily = post(functions, "report.usage", license_id="cad", period="day", timelines=True,
                 **fields)  # fmt: skip
    assert daily.status_code == 200, daily.json
    assert daily.json["period"] == "day" and daily.json["license_id"] == "cad"
    assert [(u["peak_seats"], u["denials"]) for u in daily.json["usage"]] == [(2, 3)]
    (line,) = daily.json["timelines"]
    assert (line["license_id"], line["seats"], line["start_level"]) == ("cad", 2, 0)
    # One point per period (downsampled on the server): the day's peak.
    # [period start, peak, seats, average]: 1 seat 09:10-09:20, 2 to 09:40, 1 to 09:45, 2 to
    # 10:15, 1 to 11:00: 10 + 40 + 5 + 60 + 45 = 160 seat-minutes over the window's 120.
    assert line["points"] == [["2026-11-20T00:00:00Z", 2, 2, round(160 / 120, 4)]]
    assert line["end"] == "2026-11-20T11:00:00Z"
    assert line["denials"] == [["2026-11-20T00:00:00Z", 3]]

    # No window: every event; a date means its midnight UTC, an offset is honoured.
    assert post(functions, "report.usage", tenant_id="acme").json["since"] is None
    shifted = post(functions, "report.usage", tenant_id="acme", since="2026-11-20T10:00+01:00")
    assert shifted.json["since"] == "2026-11-20T09:00:00Z"
    assert (
        post(functions, "report.usage", tenant_id="acme", until="2026-11-21").json["until"]
        == "2026-11-21T00:00:00Z"
    )


CENTURY_BY_DAY = {"since": "1970-01-01", "until": "2099-01-01", "period": "day"}
DECADE_BY_HOUR = {"since": "2016-01-01", "until": "2026-01-01", "period": "hour"}  # auto: day


@pytest.mark.parametrize(
    ("fields", "status", "code", "where"),
    [
        ({"since": "yesterday"}, 400, "invalid_request", "since"),
        ({"until": "2026-13-01"}, 400, "invalid_request", "until"),
        ({"since": 1763600000}, 400, "invalid_request", "since"),
        ({"since": "2026-11-21", "until": "2026-11-20"}, 400, "invalid_request", "before"),
        ({"since": "2026-11-20", "until": "2026-11-20"}, 400, "invalid_request", "before"),
        ({"period": "week"}, 400, "invalid_request", "period"),
        ({"period": "minute", "since": "2020-01-01"}, 400, "invalid_request", "Minute periods"),
        ({"timelines": "yes"}, 400, "invalid_request", "timelines"),
        ({"format": "csv"}, 400, "invalid_request", "format"),
        ({"tenant_id": "ghost"}, 404, "not_found", "ghost"),
        ({"license_id": "nope"}, 404, "not_found", "nope"),
        ({"tenant_id": None}, 400, "invalid_request", "tenant_id"),
        # Bounded work (issue 11): out-of-range times and windows beyond the limits.
        ({"since": "0001-01-01T00:00:00+14:00"}, 400, "invalid_request", "out of range"),
        ({"since": "0001-01-01", "until": "9999-12-31"}, 400, "invalid_request", "1970-01-01"),
        (DECADE_BY_HOUR, 400, "invalid_request", "MAX_PERIODS"),
        (CENTURY_BY_DAY, 400, "invalid_request", "10,000"),
    ],
)
def test_report_usage_bad_input(stack, functions, fields, status, code, where):
    seed(functions)
    response = post(functions, "report.usage", **{"tenant_id": "acme", **fields})
    assert where in assert_error(response, status, code)["message"]


def two_tenants_with_cad(functions) -> str:
    """acme/cad (2 seats, the returned key's) and beta/cad; beta also has cam."""
    key = seed(functions)
    assert post(functions, "tenant.create", tenant_id="beta").status_code == 201
    for lic in ("cad", "cam"):
        made = post(functions, "license.create", tenant_id="beta", license_id=lic, seats=1)
        assert made.status_code == 201
    return key


def test_revoke_without_tenant(stack, functions, redis_client):
    key = two_tenants_with_cad(functions)
    session = acquire(functions, key, "ws1").json["session_id"]

    # In several tenants: 400 naming them, and nothing is revoked.
    error = assert_error(
        post(functions, "revoke", license_id="cad", session_id=session), 400, "ambiguous_license"
    )
    assert error["tenants"] == ["acme", "beta"] and "acme, beta" in error["message"]
    assert post(functions, "status", tenant_id="acme").json["licenses"][0]["seats_used"] == 1

    # In none: the usual 404.
    missing = post(functions, "revoke", license_id="nope", session_id=session)
    assert "nope" in assert_error(missing, 404, "not_found")["message"]

    # In exactly one: that tenant's lease ends.
    beta_key = post(functions, "apikey.create", tenant_id="beta").json["key"]
    held = functions["acquire"].post(
        "/",
        json={"license_id": "cam", "client_id": "ws9"},
        headers={"Authorization": f"Bearer {beta_key}"},
    )
    assert held.status_code == 201
    revoked = post(functions, "revoke", license_id="cam", session_id=held.json["session_id"])
    assert revoked.status_code == 200, revoked.json
    assert (revoked.json["tenant_id"], revoked.json["client_id"]) == ("beta", "ws9")
    assert revoked_in_shard("beta", "cam") == [held.json["session_id"]]
    again = post(functions, "revoke", license_id="cam", session_id=held.json["session_id"])
    assert_error(again, 404, "session_not_found")

    # With the tenant, as before.
    named = post(functions, "revoke", tenant_id="acme", license_id="cad", session_id=session)
    assert named.status_code == 200 and named.json["tenant_id"] == "acme"


# -- the CLI in URL mode, against a real HTTP server -----------------------------------


@pytest.fixture
def admin_url(stack, monkeypatch):
    with serving(devserver.create_app(["admin"]), quiet=True) as url:
        yield f"{url}/admin"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """The CLI's exit code, stdout and stderr. The functions the fixtures called in this
    process logged their JSON lines on stdout before: those are not the CLI's output."""
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_through_the_admin_url(admin_url, capsys, functions, redis_client, monkeypatch):
    url = ["--admin-url", admin_url]
    assert run(capsys, "tenant", "create", "acme", *url) == (0, "created tenant acme\n", "")
    code, _, err = run(capsys, "tenant", "create", "acme", *url)
    assert code == cli.EXIT_CONFLICT and err.count("\n") == 1 and "already exists" in err

    monkeypatch.setenv("SEATLEASE_ADMIN_URL", admin_url)  # the same, from the environment
    code, _, err = run(
        capsys, "license", "create", "--tenant", "acme", "--license", "cad", "--seats", "1"
    )
    assert code == 0, err
    code, out, err = run(capsys, "apikey", "create", "--tenant", "acme")
    key = out.splitlines()[-1]
    first = acquire(functions, key, "ws1", metadata={"user": "alice", "host": "ws1"})
    assert first.status_code == 201
    assert acquire(functions, key, "ws2").status_code == 409
    code, _, err = run(
        capsys, "license", "update", "--tenant", "acme", "--license", "cad", "--seats", "2"
    )
    assert code == 0, err
    assert acquire(functions, key, "ws2").status_code == 201

    code, out, err = run(capsys, "status", "--tenant", "acme")
    assert code == 0, err
    assert "2/2" in out and "alice" in out and first.json["session_id"] in out
    status = json.loads(run(capsys, "status", "--json")[1])
    assert status["licenses"][0]["seats_used"] == 2

    session = first.json["session_id"]
    code, out, err = run(
        capsys, "revoke", "--tenant", "acme", "--license", "cad", "--session", session
    )
    assert code == 0, err
    assert f"revoked session {session}" in out and "user alice" in out
    assert revoked_in_shard("acme", "cad") == [session]
    code, out, err = run(
        capsys, "revoke", "--tenant", "acme", "--license", "cad", "--session", session
    )
    assert code == cli.EXIT_NOT_FOUND and out == "" and err.count("\n") == 1

    code, _, err = run(
        capsys, "license", "update", "--tenant", "acme", "--license", "cad", "--seats", "-1"
    )
    assert code == cli.EXIT_USAGE and "seats" in err and err.count("\n") == 1


def test_cli_url_mode_errors(stack, capsys, monkeypatch, tmp_path):
    closed = f"http://127.0.0.1:{free_port()}/admin"
    code, out, err = run(capsys, "tenant", "list", "--admin-url", closed)
    assert code == cli.EXIT_UNAVAILABLE and out == ""
    assert err.startswith("seatlease: cannot reach the admin function") and err.count("\n") == 1

    code, _, err = run(capsys, "tenant", "list", "--admin-url", "ftp://example.com/admin")
    assert code == cli.EXIT_USAGE and err.count("\n") == 1

    # A non-loopback URL needs a Google identity token; with no gcloud login there is none.
    monkeypatch.delenv("SEATLEASE_ID_TOKEN", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    code, _, err = run(capsys, "tenant", "list", "--admin-url", "https://admin.example.com/admin")
    assert code == cli.EXIT_FAILED and err.count("\n") == 1
    assert "gcloud auth print-identity-token failed" in err and "SEATLEASE_ID_TOKEN" in err


def test_identity_token_only_off_loopback(monkeypatch):
    monkeypatch.setenv("SEATLEASE_ID_TOKEN", "header.payload.signature")
    remote = backend.HttpBackend("https://europe-west1-p.cloudfunctions.net/admin")
    request = remote.request("status")
    assert request.get_header("Authorization") == "Bearer header.payload.signature"
    assert json.loads(request.data) == {"action": "status"}
    for local in (
        "http://127.0.0.1:8080/admin",
        "http://localhost:8080/admin",
        "http://[::1]:8080/admin",
    ):
        assert backend.HttpBackend(local).request("status").get_header("Authorization") is None


def test_cli_report_through_the_admin_url(admin_url, capsys, functions, tmp_path):
    seed(functions)
    event_log.insert_events(lease_events())
    window = ["--since", "2026-11-20", "--until", "2026-11-21", "--by", "hour"]
    code, by_url, err = run(
        capsys, "report", "usage", "--tenant", "acme", *window, "--json", "--admin-url", admin_url
    )
    assert code == 0, err
    code, direct, err = run(capsys, "report", "usage", "--tenant", "acme", *window, "--json")
    assert code == 0, err
    assert json.loads(by_url) == json.loads(direct)
    assert json.loads(by_url)["usage"][9]["peak_seats"] == 2  # 09:00

    code, out, err = run(
        capsys, "report", "usage", "--tenant", "acme", "--license", "cad", "--format", "csv",
        "--section", "outcomes", "--admin-url", admin_url,
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines() == [
        "license_id,acquired,borrowed,released,reclaimed,ended_by_term,revoked,reclaimed_percent,"
        "denials,lost",
        "cad,3,0,1,1,0,0,50.0,3,0",
    ]

    base = ["report", "usage", "--admin-url", admin_url]
    code, out, err = run(capsys, *base, "--tenant", "ghost")
    assert (code, out, err) == (cli.EXIT_NOT_FOUND, "", "seatlease: Tenant 'ghost' not found\n")
    code, out, err = run(capsys, *base, "--tenant", "acme", "--license", "nope")
    assert code == cli.EXIT_NOT_FOUND and out == "" and "nope" in err and err.count("\n") == 1
    code, out, err = run(capsys, *base, "--tenant", "acme", "--since", "2026-11-21",
                         "--until", "2026-11-20")  # fmt: skip
    assert code == cli.EXIT_USAGE and out == "" and "since must be before until" in err

    # The chart, from the JSON the admin function returned: a separate process whose own
    # database and Redis are unreachable, so everything it draws came over HTTP.
    chart = tmp_path / "usage.png"
    env = {
        **os.environ,
        "SEATLEASE_ADMIN_URL": admin_url,
        "DATABASE_URL": f"postgresql+pg8000://postgres@127.0.0.1:{free_port()}/none",
        "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
    }
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from seatlease_cli import main; sys.exit(main())",
         "report", "usage", "--tenant", "acme", *window, "--chart", str(chart)],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Seats in use (peak and average) and denials per hour" in proc.stdout
    assert f"chart written to {chart}" in proc.stdout
    data = chart.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000

    # After the last event only s3's seat is still out: a flat line, drawn all the same.
    code, _out, err = run(capsys, *base, "--tenant", "acme", "--since", "2026-11-21",
                          "--chart", str(tmp_path / "flat.png"))  # fmt: skip
    assert code == 0, err
    assert (tmp_path / "flat.png").read_bytes()[:4] == b"\x89PNG"
    empty = ["--since", "2026-11-20", "--until", "2026-11-20T09:00Z"]
    code, _out, err = run(
        capsys, *base, "--tenant", "acme", *empty, "--chart", str(tmp_path / "no.png")
    )
    assert code == cli.EXIT_FAILED and "nothing to chart" in err


def test_cli_revoke_without_tenant_through_the_admin_url(admin_url, capsys, functions):
    key = two_tenants_with_cad(functions)
    session = acquire(functions, key, "ws1", metadata={"user": "alice"}).json["session_id"]
    url = ["--admin-url", admin_url]
    code, out, err = run(capsys, "revoke", "--license", "cad", "--session", session, *url)
    assert (code, out) == (cli.EXIT_USAGE, "")
    assert err == (
        "seatlease: license 'cad' exists in several tenants (acme, beta); "
        "choose one with --tenant\n"
    )
    code, out, err = run(capsys, "revoke", "--license", "nope", "--session", session, *url)
    assert code == cli.EXIT_NOT_FOUND and out == "" and "nope" in err and err.count("\n") == 1

    assert post(functions, "license.create", tenant_id="acme", license_id="pdf",
                seats=1).status_code == 201  # fmt: skip
    pdf = (
        functions["acquire"]
        .post(
            "/",
            json={"license_id": "pdf", "client_id": "ws2", "metadata": {"user": "bob"}},
            headers={"Authorization": f"Bearer {key}"},
        )
        .json["session_id"]
    )
    code, out, err = run(capsys, "revoke", "--license", "pdf", "--session", pdf, *url)
    assert code == 0, err
    assert f"revoked session {pdf} on acme/pdf" in out and "user bob" in out
