"""``seatlease report sizing``: how many seats each license needed, from the seats in use,
the clients refused and the queue's waits (the admin function's ``report.sizing``: the
definitions are in shared/seatlease/records/reports/sizing.py and docs/design.md,
"Right-sizing"), as a table with each license's sentence, or JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

from seatlease.clock import iso_utc
from seatlease_cli.backend import backend_for, common_parent
from seatlease_cli.output import human_duration, table

COLUMNS = (
    "license_id", "seats", "busy_minutes", "peak_in_use", "refused_clients", "true_denials",
    "wait_p50", "wait_p95", "wait_max", "p95", "p99", "p100", "verdict",
    "idle_seat_hours", "idle_saves", "sharing_saves",
)  # fmt: skip


def register(report_sub: Any, iso: Any) -> None:
    sizing = report_sub.add_parser(
        "sizing",
        parents=[common_parent()],
        help="how many seats each license needed: refused clients, waits, a recommendation",
        description="Per license, over the minutes in which it had a seat in use or refused "
        "someone: the peak seats in use, the distinct clients refused (a client retrying is "
        "one client; one refused then granted within the minute was served), the true "
        "denials (refused and not granted within 10 minutes: they gave up), the queue's "
        "waits, and the fewest seats that would have met the demand (seats in use + seats "
        "asked by clients refused and not served in the minute) in 95 %%, 99 %% and 100 %% "
        "of those minutes, with a verdict (undersized, right, oversized) and a sentence. "
        "Over the window's last 14 days at most (issue 50): the seat-hours held by leases "
        "their clients said were idle (IDLE_SEAT_HOURS, from the idle rule's warnings), "
        "the seats reclaiming idle leases at once would have saved (IDLE_SAVES: the peak "
        "seats in use minus the peak of those not idle) and the seats letting one user's "
        "sessions share one seat would have saved (SHARING_SAVES: the peak seats in use "
        "minus the peak had each user's overlapping leases counted once), with a sentence. "
        "Times are ISO 8601 (UTC without an offset) or a length back from now (7d, 12h); "
        "at most 1,830 days; nothing after now.",
    )
    sizing.add_argument("--tenant", required=True)
    sizing.add_argument("--license", default=None, help="only this license")
    sizing.add_argument(
        "--since", type=iso, default=None, help="from (inclusive): ISO 8601, or 7d (ago)"
    )
    sizing.add_argument(
        "--until", type=iso, default=None, help="to (exclusive): ISO 8601, or 1h (ago)"
    )
    sizing.set_defaults(func=cmd_sizing)


def cmd_sizing(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"tenant_id": args.tenant}
    if args.license:
        fields["license_id"] = args.license
    for name in ("since", "until"):
        value = getattr(args, name)
        if value is not None:
            fields[name] = iso_utc(value)
    data = backend_for(args).call("report.sizing", **fields)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    rows = [dict(zip(COLUMNS, _row(line), strict=True)) for line in data["licenses"]]
    print(table(rows, COLUMNS) if rows else "no licenses")
    for line in data["licenses"]:
        estimated = " (older minutes estimated from hourly rollups)" if line["estimated"] else ""
        print(f"{line['license_id']}: {line['sentence']}{estimated}")
        if line.get("savings_sentence"):  # .get: an older admin function has none
            print(f"{line['license_id']}: {line['savings_sentence']}")
    return 0


def _row(line: dict[str, Any]) -> list[Any]:
    waits, rec = line["queue_wait_seconds"], line["recommended_seats"]
    refused = f"{line['refused_clients']:,}" + ("+" if line["refused_clients_lower_bound"] else "")
    return [
        line["license_id"],
        "-" if line["seats"] is None else line["seats"],
        line["busy_minutes"],
        line["peak_in_use"],
        refused,
        line["true_denials"],
        human_duration(waits["p50"]),
        human_duration(waits["p95"]),
        human_duration(waits["max"]),
        rec["p95"],
        rec["p99"],
        rec["p100"],
        line["verdict"],
        # .get: an older admin function answers without them
        _hours(line.get("idle_seat_hours")),
        line.get("idle_reclaim_would_save", "-"),
        line.get("sharing_would_save", "-"),
    ]


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"
