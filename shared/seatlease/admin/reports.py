"""Usage reports of a tenant's licenses: peak and average seats per period, denials,
per user, and how many seats each license needed (``report.usage``, ``report.users``,
``report.sizing``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, model_validator

from seatlease.admin.common import Action, iso_time, parse_time, require_license
from seatlease.clock import iso_utc
from seatlease.fields import Identifier
from seatlease.records import store

if TYPE_CHECKING:
    from seatlease.records.reports import Timeline, Window


def _optional_time(value: Any) -> datetime | None:
    return None if value is None else parse_time(value)


OptionalTime = Annotated[datetime | None, BeforeValidator(_optional_time)]


class ReportUsage(Action):
    action: Literal["report.usage"]
    tenant_id: Identifier
    license_id: Identifier | None = None
    since: OptionalTime = None  # inclusive
    until: OptionalTime = None  # exclusive
    # exact: the step function of seats in use, one point per change (timelines' steps);
    # auto: exact for at most reports.AUTO_POINTS changes, else the finest period keeping
    # a chart under that many points
    period: Literal["auto", "exact", "minute", "hour", "day"] = "auto"
    timelines: bool = False  # also seats in use per period (peak, average), for a chart

    @model_validator(mode="after")
    def _window_is_valid(self) -> ReportUsage:
        self.window()  # since must be before until
        return self

    def window(self) -> Window:
        from seatlease.records.reports import Window

        return Window(self.tenant_id, self.license_id, self.since, self.until)


class ReportUsers(Action):
    """Leases and queue waits per license and user (``--by user``)."""

    action: Literal["report.users"]
    tenant_id: Identifier
    license_id: Identifier | None = None
    since: OptionalTime = None  # inclusive
    until: OptionalTime = None  # exclusive

    @model_validator(mode="after")
    def _window_is_valid(self) -> ReportUsers:
        self.window()
        return self

    def window(self) -> Window:
        from seatlease.records.reports import Window

        return Window(self.tenant_id, self.license_id, self.since, self.until)


class ReportSizing(Action):
    """Right-sizing: per license, the seats it needed from the seats in use, the clients
    refused and the queue's waits (``seatlease.records.reports.sizing``)."""

    action: Literal["report.sizing"]
    tenant_id: Identifier
    license_id: Identifier | None = None
    since: OptionalTime = None  # inclusive
    until: OptionalTime = None  # exclusive

    @model_validator(mode="after")
    def _window_is_valid(self) -> ReportSizing:
        self.window()
        return self

    def window(self) -> Window:
        from seatlease.records.reports import Window

        return Window(self.tenant_id, self.license_id, self.since, self.until)


def _report_sizing(req: ReportSizing) -> tuple[int, dict[str, Any]]:
    """``SizingReport.as_dict()``: per license the busy minutes, peak, refused clients,
    true denials, queue waits, demand per period and the recommended seats with a verdict
    and a sentence. Unknown tenant or license: 404; a window beyond the report's bounds:
    400 naming the field."""
    from seatlease.records.reports.sizing import sizing_report

    store.get_tenant(req.tenant_id)
    if req.license_id is not None:
        require_license(req.tenant_id, req.license_id)
    return 200, sizing_report(req.window()).as_dict()


def _report_usage(req: ReportUsage) -> tuple[int, dict[str, Any]]:
    """Usage of a tenant's licenses from the usage rollups (shared/seatlease/records/reports/),
    as ``UsageReport.as_dict()``; with ``timelines``, also each license's peak seats in use
    per period and its configured seats, which is what a chart needs. A window beyond the
    report's bounds is a 400 naming the limit (``InvalidRequest`` from reports)."""
    from seatlease.records import reports

    store.get_tenant(req.tenant_id)  # unknown tenant or license: 404, not an empty report
    if req.license_id is not None:
        require_license(req.tenant_id, req.license_id)
    window = req.window()
    report = reports.usage_report(window, req.period)
    body = report.as_dict()
    # exact is the steps themselves: an answer saying "exact" carries them (in the
    # timelines), asked for or not
    if req.timelines or report.period == reports.EXACT:
        seats = {row["license_id"]: row["seats"] for row in store.list_licenses(req.tenant_id)}
        body["timelines"] = [_timeline_view(t, seats) for t in report.timelines]
    return 200, body


def _report_users(req: ReportUsers) -> tuple[int, dict[str, Any]]:
    """Per license and user: leases, their seat time, and time spent in the wait queue
    (``reports.user_usage``, from the raw events of the window)."""
    from seatlease.records import reports

    store.get_tenant(req.tenant_id)
    if req.license_id is not None:
        require_license(req.tenant_id, req.license_id)
    window = req.window()
    rows = reports.user_usage(window)
    return 200, {
        "tenant_id": req.tenant_id,
        "license_id": req.license_id,
        "since": iso_time(window.since),
        "until": iso_time(window.until),
        "users": [{name: getattr(row, name) for name in row.__dataclass_fields__} for row in rows],
    }


def _timeline_view(line: Timeline, seats: dict[str, int]) -> dict[str, Any]:
    """A ``reports.Timeline`` as JSON; points are compact ``[period start, peak seats,
    seats_total, average seats]`` and denials ``[period start, count]`` arrays, one per
    period (the report's bounds keep them few); ``end``: where the last point stops
    (never after now), ``end_level`` the seats in use there. With the ``exact`` period,
    ``steps``: ``{"at", "seats"}`` at the start and at each change (the last holds to
    ``end``), and denials at their own time."""
    view = {
        "license_id": line.license_id,
        "seats": seats.get(line.license_id),
        "start_level": line.start_level,
        "start_total": line.start_total,
        "points": [[iso_utc(at), peak, total, average] for at, peak, total, average in line.points],
        "denials": [[iso_utc(at), count] for at, count in line.denials],
        "end": iso_utc(line.end) if line.end else None,
        "end_level": line.end_level,
    }
    if line.steps is not None:
        view["steps"] = [{"at": iso_utc(at), "seats": seats} for at, seats in line.steps]
    return view


HANDLERS = {
    ReportUsage: _report_usage,
    ReportUsers: _report_users,
    ReportSizing: _report_sizing,
}
