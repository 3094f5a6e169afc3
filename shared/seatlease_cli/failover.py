"""``seatlease failover begin|status|end``: after a region's loss, when the service runs
on a replica that missed the last writes (docs/operations.md, "A region lost"). ``begin``
marks it as recovering: for one heartbeat interval of the longest lease each license
granted recently, new seats wait while the holders it lost come back with their lease
tokens (the service opens such windows itself when it finds a shard's data gone);
``status`` shows the windows and the leases re-admitted so far; ``end`` stops the
recovery sooner, the service's own windows too."""

from __future__ import annotations

import argparse
from typing import Any

from seatlease_cli.backend import backend_for, common_parent
from seatlease_cli.output import emit, table


def register(subparsers: Any) -> None:
    common = common_parent()
    failover = subparsers.add_parser(
        "failover",
        help="after a region's loss: hold new seats while lost holders come back",
        description="Run on the new primary (REDIS_URL / --admin-url of the region now "
        "serving) after switching Redis over and before routing traffic to it.",
    )
    actions = failover.add_subparsers(dest="failover_action", required=True, metavar="ACTION")
    begin = actions.add_parser(
        "begin",
        parents=[common],
        help="mark this Redis as recovering: new seats wait one heartbeat interval of the "
        "longest lease each license granted recently (+5 s); holders with tokens are "
        "re-admitted",
    )
    begin.set_defaults(func=cmd_failover, action_name="failover.begin")
    status = actions.add_parser(
        "status", parents=[common], help="the recovery's windows and re-admitted leases"
    )
    status.set_defaults(func=cmd_failover, action_name="failover.status")
    end = actions.add_parser(
        "end",
        parents=[common],
        help="end the recovery now: every license grants again (a lost holder coming back "
        "later may then find its seat taken)",
    )
    end.set_defaults(func=cmd_failover, action_name="failover.end")


def render(body: dict[str, Any]) -> str:
    if not body.get("recovering"):
        ended = " (ended now)" if body.get("ended") else ""
        return f"no failover recovery under way{ended}"
    opener = {
        "operator": "failover begin",
        "data_lost": "the service, on finding shards' data gone",
        "both": "failover begin, and the service on finding shards' data gone",
    }.get(body.get("opened_by", "operator"), "failover begin")
    lines = [
        f"recovering since {body['began_at']} ({body['elapsed_seconds']} s ago, opened by "
        f"{opener}): "
        f"{body['licenses_holding_grants']} license(s) still hold new seats back, "
        f"{body['recovered_leases']} lease(s) re-admitted by their tokens",
        f"the last window ends at {body['last_window_ends_at']}",
    ]
    rows = [{**w, "open": "yes" if w["open"] else "no"} for w in body["windows"]]
    if rows:
        columns = ("longest_lease_seconds", "window_seconds", "licenses", "ends_at", "open")
        lines.append(table(rows, columns))
    lost = body.get("lost_shards") or []
    if lost:
        shards = ", ".join(f"{s['shard']} (at {s['began_at']})" for s in lost)
        lines.append(f"shards whose data was found gone: {shards}")
    if body.get("note"):
        lines.append(body["note"])
    return "\n".join(lines)


def cmd_failover(args: argparse.Namespace) -> int:
    body = backend_for(args).call(args.action_name)
    if args.json:
        emit(body, True)
    else:
        print(render(body))
    return 0
