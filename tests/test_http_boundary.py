"""The one HTTP boundary (shared/seatlease/api/http.py) and its two error mappings: every
domain error has a status and an exit code, the admin and reaper functions go through
``endpoint`` like the client functions, and the reaper's one ``reaper run`` line per
run, which the monitoring's log-based metrics read (terraform/modules/monitoring)."""

from __future__ import annotations

import inspect

import functions_framework
import pytest
from http_support import REPO, log_lines
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

import seatlease_cli as cli
from seatlease import errors
from seatlease.api.http import ApiError, to_api_error
from seatlease.fields import invalid_request
from seatlease.seats import redisconn

# One instance of every domain error, with the status and code the contract gives it.
EXAMPLES = {
    errors.InvalidRequest: (errors.InvalidRequest("Bad.", details=[]), 400, "invalid_request"),
    errors.LicenseNotFound: (errors.LicenseNotFound("x"), 404, "license_not_found"),
    errors.LicenseSuspended: (errors.LicenseSuspended("x"), 403, "license_suspended"),
    errors.LeaseTooLong: (errors.LeaseTooLong(60), 400, "invalid_request"),
    errors.NoSeatsAvailable: (errors.NoSeatsAvailable(2, 2, 5), 409, "no_seats_available"),
    errors.UserLimitReached: (errors.UserLimitReached("ann", 2, 2, 9), 409, "user_limit_reached"),
    errors.QueueFull: (errors.QueueFull(30, 3, 3), 409, "queue_full"),
    errors.SeatsMismatch: (errors.SeatsMismatch("node-1", 4, 2), 409, "seats_mismatch"),
    errors.MachineMismatch: (errors.MachineMismatch("laptop"), 409, "machine_mismatch"),
    errors.Recovering: (errors.Recovering(40), 503, "recovering"),
    errors.UserDenied: (errors.UserDenied("ann"), 403, "user_denied"),
    errors.LicenseNotStarted: (
        errors.LicenseNotStarted(1_800_000_000_000),
        403,
        "license_not_started",
    ),
    errors.LicenseExpired: (
        errors.LicenseExpired(1_800_000_000_000, 1_800_086_400_000),
        403,
        "license_expired",
    ),
    errors.NotEntitled: (errors.NotEntitled(["pro"]), 403, "not_entitled"),
    errors.VersionNotEntitled: (
        errors.VersionNotEntitled("2026.10", "2026.4"),
        403,
        "version_not_entitled",
    ),
    errors.SessionExpired: (errors.SessionExpired("expired"), 410, "session_expired"),
    errors.TenantRateLimited: (errors.TenantRateLimited(1), 429, "rate_limited"),
    errors.Unauthenticated: (errors.Unauthenticated("no key"), 401, "unauthenticated"),
    errors.Forbidden: (errors.Forbidden("This is a seat key."), 403, "forbidden"),
    errors.RateLimited: (errors.RateLimited(60, 60, 7), 429, "rate_limited"),
    errors.KeyLookupsLimited: (errors.KeyLookupsLimited(50), 429, "rate_limited"),
    errors.BackendUnavailable: (errors.BackendUnavailable("redis"), 503, "backend_unavailable"),
    errors.CallOutcomeUnknown: (errors.CallOutcomeUnknown("req-1"), 503, "backend_unavailable"),
    errors.EventsNotPublished: (
        errors.EventsNotPublished({"reclaimed": 1}),
        503,
        "backend_unavailable",
    ),
    errors.NotConfigured: (errors.NotConfigured("missing REDIS_URL"), 503, "not_configured"),
    errors.StoreError: (errors.StoreError("seats must be 0 or more"), 400, "invalid_request"),
    errors.NotFound: (errors.NotFound("tenant 'x' not found"), 404, "not_found"),
    errors.Conflict: (errors.Conflict("tenant 'x' already exists"), 409, "conflict"),
    errors.SessionNotLive: (errors.SessionNotLive("session 's'"), 404, "session_not_found"),
    errors.AmbiguousLicense: (
        errors.AmbiguousLicense("cad", ["a", "b"]),
        400,
        "ambiguous_license",
    ),
}

EXIT_CODES = {
    400: cli.EXIT_USAGE,
    401: cli.EXIT_FAILED,
    403: cli.EXIT_FAILED,
    404: cli.EXIT_NOT_FOUND,
    409: cli.EXIT_CONFLICT,
    410: cli.EXIT_FAILED,
    429: cli.EXIT_FAILED,
    503: cli.EXIT_UNAVAILABLE,
}


def test_every_domain_error_has_an_example() -> None:
    """A new error class in seatlease.errors must be added here, with its status."""
    defined = {
        obj
        for obj in vars(errors).values()
        if inspect.isclass(obj) and issubclass(obj, errors.SeatError)
    }
    assert defined - {errors.SeatError} == set(EXAMPLES)


@pytest.mark.parametrize("kind", list(EXAMPLES), ids=lambda k: k.__name__)
def test_one_mapping_to_a_status_and_an_exit_code(kind: type) -> None:
    exc, status, code = EXAMPLES[kind]
    error = to_api_error(exc)
    assert (error.status, error.code) == (status, code)
    assert error.body["error"]["message"]
    # The CLI maps the same error to the exit code the admin function's status gives over
    # HTTP: both backends of the CLI exit alike.
    assert cli.exit_code(exc) == EXIT_CODES[status]


def test_error_bodies_keep_their_fields() -> None:
    assert to_api_error(EXAMPLES[errors.AmbiguousLicense][0]).body["error"]["tenants"] == [
        "a",
        "b",
    ]
    seats = to_api_error(errors.NoSeatsAvailable(2, 2, 5))
    assert seats.headers == {"Retry-After": "5"} and seats.extra["seats_used"] == 2
    unpublished = to_api_error(errors.EventsNotPublished({"reclaimed": 3}))
    assert unpublished.headers == {"Retry-After": "30"} and unpublished.extra["reclaimed"] == 3
    actions = to_api_error(errors.InvalidRequest("Unknown action.", actions=["status"]))
    assert actions.body == {
        "error": {"code": "invalid_request", "message": "Unknown action.", "actions": ["status"]}
    }
    # The store's sentences: capitalised, except when they start with a field name.
    assert to_api_error(errors.NotFound("tenant 'x' not found")).message == (
        "Tenant 'x' not found."
    )
    refused = errors.StoreError("max_lease_seconds must be at least lease_seconds")
    assert to_api_error(refused).message == "max_lease_seconds must be at least lease_seconds."


def test_redis_outages_are_503_and_exit_5_and_bugs_are_neither() -> None:
    for outage in (RedisConnectionError("refused"), ResponseError("OOM command not allowed")):
        assert to_api_error(outage).status == 503
        assert cli.exit_code(outage) == cli.EXIT_UNAVAILABLE
    bug = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    with pytest.raises(ResponseError):
        to_api_error(bug)
    assert cli.exit_code(bug) is None
    assert cli.exit_code(KeyError("x")) is None
    already = ApiError(418, "teapot", "No.")
    assert to_api_error(already) is already


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    seats: int

    @field_validator("seats")
    @classmethod
    def _small(cls, value: int) -> int:
        if value > 10:
            raise ValueError("seats may be at most 10")
        return value


def test_one_wording_for_validation_errors() -> None:
    def problem(data: dict, what: str = "request") -> errors.InvalidRequest:
        with pytest.raises(ValidationError) as info:
            _Model.model_validate(data)
        return invalid_request(info.value, what)

    extra = problem({"seats": 1, "colour": "red"})
    assert extra.fields["details"] == [{"field": "colour", "problem": "unknown field"}]
    assert extra.message == "Invalid request: colour: unknown field."
    ours = problem({"seats": 11}, "license.create request")
    # Our validators' sentence, without pydantic's "Value error, ".
    assert ours.message == "Invalid license.create request: seats: seats may be at most 10."


def _app(name: str):
    return functions_framework.create_app(name, str(REPO / "functions" / name / "main.py"))


def test_reaper_logs_one_run_line(redis_url, pubsub, capsys) -> None:
    client = _app("reaper").test_client()
    capsys.readouterr()
    assert client.post("/").status_code == 200
    (line,) = log_lines(capsys.readouterr().out)
    assert (line["severity"], line["message"], line["status"]) == ("INFO", "reaper run", 200)
    assert {"reclaimed", "published", "outbox_backlog", "shards_swept", "duration_ms"} <= set(line)

    assert client.get("/").status_code == 405
    (line,) = log_lines(capsys.readouterr().out)
    assert line["severity"] == "WARNING" and line["outcome"] == "method_not_allowed"
    assert line["message"] != "reaper run"  # not counted as a run by the monitoring


def test_reaper_logs_a_failed_run_at_error(monkeypatch, capsys) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    redisconn.reset()
    client = _app("reaper").test_client()
    capsys.readouterr()
    down = client.post("/")
    assert down.status_code == 503 and down.json["error"]["code"] == "backend_unavailable"
    (line,) = log_lines(capsys.readouterr().out)
    assert (line["severity"], line["message"]) == ("ERROR", "reaper run failed")
    assert "redis" in line["error"]
    redisconn.reset()
