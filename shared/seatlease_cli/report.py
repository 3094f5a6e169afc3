"""``seatlease report usage``: peak seats, denials, lease durations, endings and lost
leases of one tenant's licenses, from the usage rollups (shared/seatlease/records/reports/), as a
table, CSV or JSON, and optionally a PNG chart of seats in use per period (the average as a
line, the peak as a lighter band) against the seat limit, up to now.

The report is the admin function's ``report.usage`` answer, from the same backend as every
other operator command (shared/seatlease_cli/backend.py: ``--admin-url`` / ``SEATLEASE_ADMIN_URL``,
a running ``seatlease local``, or in-process against ``DATABASE_URL``); the chart is drawn
here from that JSON (its ``timelines``)."""

from __future__ import annotations

import argparse
import csv
import io
import json
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seatlease.clock import iso_utc
from seatlease_cli.backend import backend_for, common_parent
from seatlease_cli.exits import EXIT_USAGE, CommandError
from seatlease_cli.output import human_duration, table

if TYPE_CHECKING:
    from seatlease.records.reports import Timeline, Window

SECTIONS = ("usage", "durations", "outcomes")
USAGE_COLUMNS = (
    "license_id", "period_start", "peak_seats", "average_seats", "seats_total", "denials",
)  # fmt: skip
PERIOD_CHOICES = ("auto", "exact", "minute", "hour", "day")
# reclaimed: after a crash; ended_by_term: by the license's term (its end, or a start
# moved later); ended_by_idle: by the license's idle rule (the client said it was idle
# and was warned first): neither is counted as a crash (nor in reclaimed_percent).
# ended_by_idle is shown (table and CSV) when some row has one: a license without an idle
# rule keeps the columns it had; --json always carries it.
DURATION_COLUMNS = (
    "license_id", "client_id", "leases", "average", "max", "total", "reclaimed",
    "ended_by_term", "ended_by_idle", "open",
)  # fmt: skip
OUTCOME_COLUMNS = (
    "license_id", "acquired", "borrowed", "released", "reclaimed", "ended_by_term",
    "ended_by_idle", "revoked", "reclaimed_percent", "denials", "lost",
)  # fmt: skip


def register(subparsers: Any) -> None:
    report = subparsers.add_parser("report", help="usage reports from the audit log")
    report_sub = report.add_subparsers(dest="report_command", required=True, metavar="REPORT")
    usage = report_sub.add_parser(
        "usage",
        parents=[common_parent()],
        help="peak seats, denials, lease durations and endings per license",
        description="Usage of a tenant's licenses from the usage rollups of the audit log: "
        "peak and average concurrent seats, seat-seconds and denials per minute, hour or "
        "day (UTC), lease "
        "durations per client, and how leases ended (released, reclaimed after a crash, "
        "ended by the license's term, reclaimed by its idle rule, revoked, lost with "
        "Redis's data). Times are ISO "
        "8601 (a date means its midnight "
        "UTC; no offset means UTC) or a length back from now (7d, 12h, 30m), from 1970 "
        "to 2100; a report covers at most 10,000 "
        "periods per license (by hour: about 416 days; use --by day beyond) and nothing "
        "after now. Minute periods cover the last 14 days.",
    )
    usage.add_argument("--tenant", required=True)
    usage.add_argument("--license", default=None, help="only this license")
    usage.add_argument(
        "--since", type=_iso, default=None, help="from (inclusive): ISO 8601, or 7d (ago)"
    )
    usage.add_argument(
        "--until", type=_iso, default=None, help="to (exclusive): ISO 8601, or 1h (ago)"
    )
    usage.add_argument(
        "--by",
        choices=(*PERIOD_CHOICES, "user"),
        default="auto",
        help="period: auto (default: exact when the window holds at most 1,500 changes, "
        "else the finest period that keeps the chart under 1,500 points), exact (the "
        "chart steps at each change of seats in use; the table is per the period auto "
        "would pick otherwise), minute, hour or day; or user: leases, seat time and time "
        "queued per license and user (any window within the retention)",
    )
    usage.add_argument(
        "--format",
        choices=("table", "csv", "json"),
        default=None,
        help="table (default), csv or json (--json is the same as --format json)",
    )
    usage.add_argument(
        "--section",
        choices=("all", *SECTIONS),
        default="all",
        help="what to print (all); with csv, 'all' prints one block per section, each "
        "with its header row, separated by an empty line",
    )
    usage.add_argument(
        "--chart", type=Path, default=None, metavar="PNG", help="also draw seats in use to PNG"
    )
    usage.set_defaults(func=cmd_usage)
    from seatlease_cli import sizing

    sizing.register(report_sub, _iso)


def _iso(value: str) -> datetime:
    """A time: ISO 8601, or a length back from now as ``--expiring`` takes it (``7d``,
    ``12h``, ``90m``, ``30s``, ``2w``: ``--since 7d`` is seven days ago)."""
    import re

    from seatlease import clock
    from seatlease.admin import parse_time  # the admin action's own parsing, checked early

    if re.fullmatch(r"\s*\d+\s*[smhdwSMHDW]\s*", value):
        from seatlease_cli.licenses import duration

        return clock.now() - timedelta(seconds=duration(value.strip().replace(" ", "")))
    try:
        return parse_time(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{exc}, or a length back from now (7d, 12h, 30m)"
        ) from None


def _iso_text(value: datetime | None) -> str:
    return iso_utc(value) if value else "-"


def _output_format(args: argparse.Namespace) -> str:
    if args.json and args.format not in (None, "json"):
        raise CommandError(f"--json conflicts with --format {args.format}", EXIT_USAGE)
    return "json" if args.json else args.format or "table"


def require_charts() -> None:
    """``--chart`` draws with matplotlib, an optional extra: say so before any work."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        missing = f" (missing module {exc.name})" if exc.name not in (None, "matplotlib") else ""
        raise CommandError(
            f"--chart needs matplotlib{missing}: pip install 'seatlease[charts]'"
        ) from None


USER_COLUMNS = (
    "license_id",
    "user",
    "leases",
    "open_leases",
    "ended_by_term",
    "ended_by_idle",
    "seat_time",
    "longest",
    "queue_served",
    "queue_left",
    "queued_total",
    "queued_max",
)


def cmd_users(args: argparse.Namespace, fmt: str) -> int:
    """``--by user``: the ``report.users`` action, as a table, CSV or JSON."""
    if args.chart is not None:
        raise CommandError("--chart draws seats per period: not with --by user", EXIT_USAGE)
    fields: dict[str, Any] = {"tenant_id": args.tenant}
    if args.license:
        fields["license_id"] = args.license
    for name in ("since", "until"):
        if getattr(args, name) is not None:
            fields[name] = _iso_text(getattr(args, name))
    data = backend_for(args).call("report.users", **fields)
    if fmt == "json":
        print(json.dumps(data, indent=2))
        return 0
    rows = [
        {
            **row,
            "user": row["user"] if row["user"] is not None else "-",
            "seat_time": human_duration(row["seat_seconds"]),
            "longest": human_duration(row["longest_seconds"]),
            "queued_total": human_duration(row["queued_seconds_total"]),
            "queued_max": human_duration(row["queued_seconds_max"]),
        }
        for row in data["users"]
    ]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        columns = list(data["users"][0]) if data["users"] else ["license_id", "user"]
        writer.writerow(columns)
        for row in data["users"]:
            writer.writerow(["" if row.get(c) is None else row.get(c) for c in columns])
        print(out.getvalue(), end="")
    else:
        print("Leases and time queued per user")
        columns = idle_columns(USER_COLUMNS, rows)
        print(table(rows, columns) if rows else "  no leases in the window")
    return 0


def cmd_usage(args: argparse.Namespace) -> int:
    fmt = _output_format(args)
    if args.by == "user":
        return cmd_users(args, fmt)
    if args.chart is not None:
        require_charts()
    fields: dict[str, Any] = {"tenant_id": args.tenant, "period": args.by}
    if args.license:
        fields["license_id"] = args.license
    for name in ("since", "until"):
        if getattr(args, name) is not None:
            fields[name] = _iso_text(getattr(args, name))
    if args.chart is not None:
        fields["timelines"] = True
    data = backend_for(args).call("report.usage", **fields)
    timelines = data.pop("timelines", None)
    sections = SECTIONS if args.section == "all" else (args.section,)
    if fmt == "json":
        keep = {"usage", "durations", "outcomes"} - set(sections)
        shown = {k: v for k, v in data.items() if k not in keep}
        if data.get("period") == "exact" and timelines is not None:
            shown["timelines"] = timelines  # the steps are what exact means
        print(json.dumps(shown, indent=2))
    elif fmt == "csv":
        print(render_csv(data, sections), end="")
    else:
        print(render_table(data, sections))
    if args.chart is not None:
        lines, window, seats = chart_input(data, timelines or [])
        draw_chart(lines, window, args.chart, seats, period=_usage_period(data))
        if fmt == "table":
            print(f"\nchart written to {args.chart}")
    return 0


def _usage_period(data: dict[str, Any]) -> str:
    """The usage rows' period: ``usage_period`` (the bucketed one under ``exact``)."""
    return str(data.get("usage_period") or data["period"])


def chart_input(
    data: dict[str, Any], timelines: list[dict[str, Any]]
) -> tuple[list[Timeline], Window, dict[str, int]]:
    """The ``report.usage`` answer (with ``timelines``) back into what ``draw_chart``
    takes: ``reports.Timeline`` objects, the ``reports.Window`` and configured seats."""
    from seatlease.admin import parse_time as when
    from seatlease.records.reports import Timeline, Window

    if any(len(p) < 4 for t in timelines for p in t["points"]):  # before average_seats
        raise CommandError(
            "the admin function answers without average seats (an older release): "
            "deploy this release's admin function to draw charts"
        )
    window = Window(
        data["tenant_id"],
        data.get("license_id"),
        when(data["since"]) if data.get("since") else None,
        when(data["until"]) if data.get("until") else None,
    )
    lines = [
        Timeline(
            license_id=t["license_id"],
            start_level=int(t["start_level"]),
            start_total=t["start_total"],
            points=[
                (when(at), int(peak), total, float(average))
                for at, peak, total, average in t["points"]
            ],
            denials=[(when(at), int(count)) for at, count in t["denials"]],
            end=when(t["end"]) if t.get("end") else None,
            end_level=int(t.get("end_level") or 0),
            steps=None
            if t.get("steps") is None
            else [(when(step["at"]), int(step["seats"])) for step in t["steps"]],
        )
        for t in timelines
    ]
    seats = {t["license_id"]: t["seats"] for t in timelines if t.get("seats") is not None}
    return lines, window, seats


def _rows(data: dict[str, Any], section: str, *, readable: bool) -> tuple[list[dict], tuple]:
    if section == "usage":
        rows = data["usage"]
        if readable:
            fmt = "%Y-%m-%d" if _usage_period(data) == "day" else "%Y-%m-%d %H:%M"
            rows = [
                {**r, "period_start": datetime.fromisoformat(r["period_start"]).strftime(fmt)}
                for r in rows
            ]
        return rows, USAGE_COLUMNS
    if section == "durations":
        rows = [
            {
                **r,
                "average": human_duration(r["average_seconds"])
                if readable
                else r["average_seconds"],
                "max": human_duration(r["max_seconds"]) if readable else r["max_seconds"],
                "total": human_duration(r["total_seconds"]) if readable else r["total_seconds"],
            }
            for r in data["durations"]
        ]
        columns = DURATION_COLUMNS
        if not readable:
            columns = tuple(
                {"average": "average_seconds", "max": "max_seconds", "total": "total_seconds"}.get(
                    c, c
                )
                for c in columns
            )
            # .get: an older admin function answers without ended_by_term (ended_by_idle)
            rows = [{k: r.get(k) for k in columns} for r in rows]
        return rows, idle_columns(columns, rows)
    rows = data["outcomes"]
    return rows, idle_columns(OUTCOME_COLUMNS, rows)


def idle_columns(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """``columns`` without ``ended_by_idle`` unless some row has one (an older admin
    function answers without it: none)."""
    if any(row.get("ended_by_idle") for row in rows):
        return columns
    return tuple(c for c in columns if c != "ended_by_idle")


def render_table(data: dict[str, Any], sections: tuple[str, ...]) -> str:
    scope = data["tenant_id"] + (f", license {data['license_id']}" if data["license_id"] else "")
    since = data["since"] or "first event"
    until = data["until"] or "last event"
    parts = [f"Usage of tenant {scope}, {since} to {until} (UTC)"]
    titles = {
        "usage": f"Seats in use (peak and average) and denials per {_usage_period(data)}",
        "durations": "Lease durations per client (leases acquired in the window)",
        "outcomes": "How leases ended",
    }
    for section in sections:
        rows, columns = _rows(data, section, readable=True)
        body = table(rows, columns) if rows else "(no events)"
        parts.append(f"{titles[section]}\n{body}")
    if data.get("lost_leases") and "outcomes" in sections:
        parts.append(
            f"{data['lost_leases']} lease(s) closed as lost: they vanished without an ending "
            "event (Redis lost its data); a later event's seat count showed them gone."
        )
    return "\n\n".join(parts)


def render_csv(data: dict[str, Any], sections: tuple[str, ...]) -> str:
    blocks = []
    for section in sections:
        rows, columns = _rows(data, section, readable=False)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        blocks.append(out.getvalue())
    return "\n".join(blocks)


# -- the chart -------------------------------------------------------------------------

STEPS_LABEL = "seats in use"
AVERAGE_LABEL = "average seats in use"
PEAK_LABEL = "peak seats in use"
LIMIT_LABEL = "seat limit"
DENIED_LABEL = "requests refused (no seat free)"
BLUE, GREY, RED = "#1f6fb4", "#444444", "#d62728"


def draw_chart(
    lines: list[Any],
    window: Any,
    path: Path,
    seats: dict[str, int] | None = None,
    now: datetime | None = None,
    period: str = "period",
) -> list[dict[str, Any]]:
    """One subplot per license, from the window's start to its end or now, whichever is
    first (a lease still held is drawn up to now). With exact steps (``period``
    ``exact``): the seats in use at every moment, a step at each change. Otherwise, per
    period: the average seats in use (a step line) and the peak (a lighter band under
    it). Also the seat limit (dashed step; before the first event that recorded it, the
    license's configured ``seats``) and refused requests (red markers sized by count, at
    their own time with exact steps, else mid-period). One legend for the whole figure,
    under the panels, so it never covers a panel or its title. Matplotlib is imported
    here (Agg backend, no display) so the rest of the CLI does not pay for it.

    Returns what was drawn, read back from the figure's artists, per license:
    ``license_id``, ``edges`` (period or step boundaries, aware UTC), ``average`` and
    ``peak`` (one value per period) or ``steps`` (seats in use per step), ``denials``
    (the markers' times), ``xlim`` (the x axis's ends), ``labels`` (the legend's),
    ``title`` and ``overlaps`` (what the legend covers: nothing)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    if not lines:
        raise CommandError("nothing to chart: no lease events in the window")
    from seatlease import clock

    start, end = _chart_span(lines, window, now or clock.now())
    pad = (end - start) * 0.02
    bucket = PERIODS_SECONDS.get(period)

    fig, axes = plt.subplots(
        len(lines),
        1,
        figsize=(11, 2.6 * len(lines) + 1.2),
        sharex=True,
        squeeze=False,
        layout="constrained",
    )
    for ax, line in zip(axes[:, 0], lines, strict=True):
        if line.steps is not None:
            edges, values = _step_series(line, start, end)
            ax.stairs(values, edges, baseline=0, fill=True, color=BLUE, alpha=0.18)
            ax.stairs(values, edges, baseline=None, color=BLUE, linewidth=1.8,
                      label=STEPS_LABEL)  # fmt: skip
            peaks, averages = values, values
        else:
            edges, peaks, averages = _period_series(line, start, end)
            ax.stairs(peaks, edges, baseline=0, fill=True, color=BLUE, alpha=0.18,
                      label=f"{PEAK_LABEL} (per {period})")  # fmt: skip
            ax.stairs(averages, edges, baseline=None, color=BLUE, linewidth=1.8,
                      label=AVERAGE_LABEL)  # fmt: skip
        totals = _limits(line, edges, seats)
        ax.stairs(totals, edges, baseline=None, color=GREY, linestyle="--", linewidth=1.2,
                  label=LIMIT_LABEL)  # fmt: skip
        known = [t for t in totals if t == t]  # NaN: unknown
        top = max([*peaks, *known, 1])
        refused = 0
        if line.denials:
            counts = [c for _t, c in line.denials]
            refused = sum(counts)
            biggest = max(counts)
            sizes = [30 + 170 * c / biggest for c in counts]
            if line.steps is not None or bucket is None:
                times = [t for t, _c in line.denials]
            else:  # a period's count: its middle, never after the axis's end
                times = [min(t + timedelta(seconds=bucket / 2), end) for t, _c in line.denials]
            ax.scatter(times, [top * 1.08] * len(counts), s=sizes, marker="v", color=RED,
                       zorder=3, label=DENIED_LABEL)  # fmt: skip
            if len(counts) <= 12:
                for when, count in zip(times, counts, strict=True):
                    ax.annotate(str(count), (when, top * 1.08), textcoords="offset points",
                                xytext=(0, 8), ha="center", fontsize=8, color=RED)  # fmt: skip
        ax.set_ylim(0, top * 1.3)
        ax.set_xlim(start - pad, end)
        ax.set_ylabel("seats")
        ax.yaxis.get_major_locator().set_params(integer=True)
        limit = f" of {known[-1]:.0f}" if known else ""
        spans = [(b - a).total_seconds() for a, b in pairwise(edges)]
        overall = sum(a * s for a, s in zip(averages, spans, strict=True)) / (sum(spans) or 1)
        title = (f"{line.license_id}: at most {max(peaks, default=0)}{limit} seats in use, "
                 f"{overall:.2f} on average")  # fmt: skip
        if refused:
            title += f"; {refused} request{'s' if refused != 1 else ''} refused"
        ax.set_title(title, loc="left", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    handles: dict[str, Any] = {}
    for ax in axes[:, 0]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    # "outside": the constrained layout gives the legend a row of its own under the panels.
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=4,
               fontsize=9, frameon=False)  # fmt: skip
    bottom = axes[-1, 0]
    locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
    bottom.xaxis.set_major_locator(locator)
    bottom.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
    bottom.set_xlabel("time (UTC)")
    fig.suptitle(f"Seats in use, tenant {window.tenant_id}", x=0.01, ha="left", fontsize=12)
    fig.canvas.draw()  # the layout, as saved
    overlaps = _legend_overlaps(fig, axes[:, 0])
    drawn = [
        {**_read_back(ax, line.license_id, fig), "overlaps": overlaps}
        for ax, line in zip(axes[:, 0], lines, strict=True)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    # What was drawn goes into the PNG too (a text chunk): a test, or a reader of the
    # picture, can check the series without reading pixels (read_chart_series).
    series = json.dumps([_series_json(d) for d in drawn], separators=(",", ":"))
    fig.savefig(path, dpi=110, metadata={SERIES_KEY: series})
    plt.close(fig)
    return drawn


PERIODS_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


def _legend_overlaps(fig: Any, axes: Any) -> list[str]:
    """What the figure's legend covers, by name (a panel, its title, tick labels, the
    x label, the figure title): nothing, when it is laid out right."""
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    parts = {"figure title": fig._suptitle}
    for i, ax in enumerate(axes):
        parts[f"panel {i}"] = ax
        parts[f"panel {i} title"] = ax.title
        parts[f"panel {i} x label"] = ax.xaxis.label
        for j, tick in enumerate(ax.get_xticklabels()):
            if tick.get_text():
                parts[f"panel {i} tick {j}"] = tick
    return sorted(
        name
        for name, artist in parts.items()
        if artist is not None
        and (box := artist.get_window_extent(renderer)).width > 0
        and legend.overlaps(box)
    )


SERIES_KEY = "seatlease-series"


def _series_json(drawn: dict[str, Any]) -> dict[str, Any]:
    return {
        **drawn,
        "edges": [iso_utc(e) for e in drawn.get("edges", [])],
        "denials": [iso_utc(d) for d in drawn.get("denials", [])],
        "xlim": [iso_utc(x) for x in drawn["xlim"]],
        "labels": sorted(drawn["labels"]),
    }


def read_chart_series(path: Path) -> list[dict[str, Any]]:
    """The series a chart PNG says it draws (``draw_chart``'s answer, times as RFC 3339
    text), from its ``seatlease-series`` text chunk."""
    from PIL import Image

    with Image.open(path) as image:
        return json.loads(image.text[SERIES_KEY])  # type: ignore[attr-defined]


def _chart_span(lines: list[Any], window: Any, now: datetime) -> tuple[datetime, datetime]:
    """The x axis: from ``since`` (else the first point or step) to the window's end or
    now, whichever is first: a lease still held is drawn up to now, not to the last
    event."""
    starts = [window.since] if window.since else []
    for line in lines:
        if window.since:
            continue
        starts += [d[0] for d in line.denials[:1]]
        if line.steps is not None:  # exact: from the first change, not its minute's start
            starts += [s[0] for s in line.steps[:1]]
        else:
            starts += [p[0] for p in line.points[:1]]
    start = min(starts) if starts else now
    end = min(window.until, now) if window.until is not None else now
    if end <= start:
        end = start + timedelta(minutes=1)
    return start, end


def _step_series(line: Any, start: datetime, end: datetime) -> tuple[list[datetime], list[int]]:
    """Exact steps clipped to the axis: edges (each change, then ``end``) and the seats
    in use from each edge to the next; the last level holds to ``end``."""
    edges: list[datetime] = []
    values: list[int] = []
    for at, seats in line.steps or [(start, line.start_level)]:
        at = max(at, start)
        if at >= end:
            break
        if edges and at == edges[-1]:
            values[-1] = seats
        else:
            edges.append(at)
            values.append(seats)
    if not edges:
        edges, values = [start], [line.end_level]
    edges.append(end)
    return edges, values


def _period_series(
    line: Any, start: datetime, end: datetime
) -> tuple[list[datetime], list[int], list[float]]:
    """Period edges (the first from ``start``) with each period's peak and average; after
    the last period (its timeline's ``end``) the level then held (``end_level``) up to
    ``end``; a line without points is its level carried from ``start`` to ``end``."""
    if not line.points:
        return [start, end], [line.start_level], [float(line.start_level)]
    edges = [max(line.points[0][0], start), *(p[0] for p in line.points[1:])]
    peaks = [p[1] for p in line.points]
    averages = [p[3] for p in line.points]
    stop = min(line.end or end, end)
    edges.append(stop)
    if stop < end:  # held on after the last event: drawn up to now
        edges.append(end)
        peaks.append(line.end_level)
        averages.append(float(line.end_level))
    return edges, peaks, averages


def _limits(line: Any, edges: list[datetime], seats: dict[str, int] | None) -> list[float]:
    """The seat count in force over each span between ``edges``: the last one recorded
    at or before the span's start (period points), else the first known (or the
    configured ``seats``)."""
    recorded = [(p[0], p[2]) for p in line.points if p[2] is not None]
    total = line.start_total
    if total is None:
        total = recorded[0][1] if recorded else (seats or {}).get(line.license_id)
    out, i = [], 0
    for at in edges[:-1]:
        while i < len(recorded) and recorded[i][0] <= at:
            total = recorded[i][1]
            i += 1
        out.append(float("nan") if total is None else float(total))
    return out


def _read_back(ax: Any, license_id: str, fig: Any) -> dict[str, Any]:
    """The series one subplot shows, from its artists (not from the data given to it)."""
    import matplotlib.dates as mdates
    from matplotlib.collections import PathCollection
    from matplotlib.patches import StepPatch

    found: dict[str, Any] = {"license_id": license_id, "xlim": None, "denials": []}
    for patch in ax.patches:
        if not isinstance(patch, StepPatch):
            continue
        values, edges, _baseline = patch.get_data()
        label = patch.get_label()
        if label.startswith(PEAK_LABEL):
            found["peak"] = [float(v) for v in values]
            found["edges"] = [mdates.num2date(e, tz=UTC) for e in edges]
        elif label == AVERAGE_LABEL:
            found["average"] = [float(v) for v in values]
        elif label == STEPS_LABEL:
            found["steps"] = [float(v) for v in values]
            found["edges"] = [mdates.num2date(e, tz=UTC) for e in edges]
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and collection.get_label() == DENIED_LABEL:
            found["denials"] = [mdates.num2date(x, tz=UTC) for x, _y in collection.get_offsets()]
    found["xlim"] = tuple(mdates.num2date(x, tz=UTC) for x in ax.get_xlim())
    found["labels"] = {t.get_text() for legend in fig.legends for t in legend.get_texts()}
    found["title"] = ax.get_title(loc="left")
    return found
