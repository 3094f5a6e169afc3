"""``seatlease status`` (who holds which seat, like FlexNet's ``lmstat -a``),
``seatlease revoke`` (end one lease now, like ``lmremove``) and ``seatlease capacity``
(Redis used and maximum memory, and what holds it)."""

from __future__ import annotations

import argparse
from typing import Any

from seatlease_cli.backend import backend_for, common_parent
from seatlease_cli.exits import EXIT_NOT_FOUND, EXIT_USAGE, CommandError
from seatlease_cli.output import emit, table

LICENSE_COLUMNS = ("tenant_id", "license_id", "used", "limit", "overage", "suspended")
LEASE_COLUMNS = ("session_id", "client_id", "user", "host", "acquired_at", "expires_in", "state")
QUEUE_COLUMNS = ("position", "client_id", "user", "host", "waiting_seconds", "seat_held")


def _weighted(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """``columns`` with ``seats`` (each lease's or ticket's weight) after the client, when
    some row weighs more than one seat: a license of plain leases shows no such column."""
    if not any(int(row.get("seats") or 1) > 1 for row in rows):
        return columns
    at = columns.index("client_id") + 1
    return (*columns[:at], "seats", *columns[at:])


def _shared(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """``columns`` with ``shared`` (the share key and its sessions) after the host, when
    some lease shares its seat (issue 50): a license without sharing shows no such
    column."""
    if not any(row.get("shared") for row in rows):
        return columns
    at = columns.index("host") + 1
    return (*columns[:at], "shared", *columns[at:])


def _shared_text(lease: dict[str, Any]) -> str:
    """``ann (3 sessions)``: the seat group this lease shares, and its sessions."""
    key = lease.get("shared")
    if not key:
        return ""
    sessions = lease.get("shared_sessions")
    if not isinstance(sessions, int):
        return str(key)
    return f"{key} ({sessions} session{'' if sessions == 1 else 's'})"


def rules_text(lic: dict[str, Any]) -> list[str]:
    """The license's idle and sharing rules in words (issue 50), none when off (.get:
    an older admin function says neither)."""
    lines = []
    timeout = int(lic.get("idle_timeout_seconds") or 0)
    if timeout:
        when = "at once" if lic.get("idle_reclaim") == "always" else "when a seat is needed"
        lines.append(f"idle: a lease idle {_expires_in(timeout)} is warned, then reclaimed {when}")
    share = lic.get("share") or "none"
    if share != "none":
        by = {"user": "user", "host": "host", "user_host": "user and host"}.get(share, share)
        limit = int(lic.get("share_limit") or 0)
        room = f"{limit} session{'' if limit == 1 else 's'} a seat" if limit else "no limit"
        lines.append(f"shared by {by}: one seat for a {by}'s sessions ({room})")
    return lines


def _clock(rfc3339: str) -> str:
    """``09:21:05Z`` of an RFC 3339 UTC time (the date is today's, or close)."""
    return rfc3339[11:19] + "Z" if len(rfc3339) >= 19 else rfc3339


def _state(lease: dict[str, Any]) -> str:
    """``borrowed`` (no heartbeats until it expires), ``lingering`` (released; held for
    its client until it expires), ``idle`` (warned by the license's idle rule: reclaimed
    at the time shown unless its client is used by then) or ``live``."""
    if lease.get("borrowed"):
        return "borrowed"
    if lease.get("lingering"):
        return "lingering"
    idle_at = lease.get("idle_reclaim_at")  # .get: an older admin function has none
    if idle_at:
        return f"idle: reclaimed at {_clock(str(idle_at))} unless used"
    return "live"


def register(subparsers: Any) -> None:
    common = common_parent()
    status = subparsers.add_parser(
        "status",
        parents=[common],
        help="licenses with seats in use and their live leases (like lmstat -a)",
    )
    status.add_argument("--tenant", default=None, help="only this tenant's licenses")
    status.add_argument(
        "--license",
        default=None,
        help="only this license; without --tenant, the one tenant that has it",
    )
    status.set_defaults(func=cmd_status)

    capacity = subparsers.add_parser(
        "capacity",
        parents=[common],
        help="Redis memory used and maximum, live leases, outbox backlog",
        description="Redis used and maximum memory (INFO memory; summed over a cluster's "
        "primaries) and what holds it. Writes fail at 100% (maxmemory-policy noeviction); "
        "docs/operations.md (Capacity) sizes memory_size_gb.",
    )
    capacity.set_defaults(func=cmd_capacity)

    revoke = subparsers.add_parser(
        "revoke",
        parents=[common],
        help="end a live lease now (like lmremove); no confirmation",
        usage="seatlease revoke [-h] [--json] [--admin-url URL] [--tenant TENANT] --license "
        "LICENSE (--session SESSION | --client CLIENT | [--user USER] [--host HOST])",
        description="End a live lease now, recorded as a lease.revoked event. The client's "
        "next heartbeat answers 410 and it must acquire again. --user and/or --host end "
        "every lease of that user (on that host) on the license, each as --session would "
        "(as lmremove by user). Without --tenant, the one "
        "tenant that has the license; exit code 2 if several have it (the message lists "
        "them), 3 if none does or the session (user, host) holds no seat.",
    )
    revoke.add_argument(
        "--tenant", default=None, help="the license's tenant (needed only if several have it)"
    )
    revoke.add_argument("--license", required=True, help="license id")
    which = revoke.add_mutually_exclusive_group()
    which.add_argument(
        "--session",
        help="session id (see status); one made before 2026-11-23 that starts with '-' "
        "is given as --session=ID",
    )
    which.add_argument("--client", help="the client id whose lease to end (see status)")
    revoke.add_argument("--user", help="every lease of this user (status's USER column)")
    revoke.add_argument(
        "--host", help="every lease from this host (status's HOST column); with --user, both"
    )
    revoke.set_defaults(func=cmd_revoke)


def _expires_in(seconds: int) -> str:
    """``45s``, ``4m56s``; hours and days for a borrowed seat: ``2h05m``, ``6d23h``."""
    minutes, secs = divmod(int(seconds), 60)
    hours, mins = divmod(minutes, 60)
    days, hrs = divmod(hours, 24)
    if days:
        return f"{days}d{hrs:02d}h"
    if hours:
        return f"{hours}h{mins:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def render_status(body: dict[str, Any]) -> str:
    """The readable form: one table of licenses, then each license's leases."""
    licenses = body["licenses"]
    if not licenses:
        return "no licenses"
    rows = [
        {
            **lic,
            "used": f"{lic['seats_used']}/{lic['seats']}",
            "limit": lic["seat_limit"],
            "overage": f"{lic['overage_percent']}%",
        }
        for lic in licenses
    ]
    parts = [table(rows, LICENSE_COLUMNS)]
    for lic in licenses:
        count = len(lic["leases"])
        heading = f"{lic['tenant_id']}/{lic['license_id']}: {count} live lease"
        heading += "" if count == 1 else "s"
        weights = sum(int(lease.get("seats") or 1) for lease in lic["leases"])
        # some lease counts as several seats, or some share one (seats_used counts a
        # shared seat once; .get: an older admin function, weights alone)
        held = int(lic.get("seats_used", weights)) if count else 0
        if held != count:
            heading += f" holding {held} seat" + ("" if held == 1 else "s")
        heading += "".join(f"\n  {line}" for line in rules_text(lic))
        if lic.get("term_state", "perpetual") != "perpetual" or lic.get("entitlements"):
            heading += f"\n  term: {lic['term_text']}"
            if lic["term_state"] == "in_grace":
                heading += " (IN GRACE: renew before it stops)"
            elif lic["term_state"] == "expired":
                heading += " (EXPIRED: no new seats)"
            if lic.get("entitlements"):
                heading += f"\n  entitlements: {', '.join(lic['entitlements'])}"
            if lic.get("max_version"):
                heading += f"\n  versions up to {lic['max_version']}"
        leases = [
            {
                **lease,
                "expires_in": _expires_in(lease["expires_in_seconds"]),
                "state": _state(lease),
                "shared": _shared_text(lease),
            }
            for lease in lic["leases"]
        ]
        columns = _shared(_weighted(LEASE_COLUMNS, leases), lic["leases"])
        lines = table(leases, columns).splitlines() if leases else []
        if lic.get("queue"):
            lines.append(f"queue: {len(lic['queue'])} waiting")
            lines += table(lic["queue"], _weighted(QUEUE_COLUMNS, lic["queue"])).splitlines()
        parts.append("\n".join([heading, *("  " + line for line in lines)]))
    return "\n\n".join(parts)


def _call(args: argparse.Namespace, action: str, **fields: Any) -> dict[str, Any]:
    """The admin action; a license id several tenants have (no --tenant) is exit 2,
    naming them."""
    try:
        return backend_for(args).call(action, **fields)
    except CommandError as exc:
        if exc.error.get("code") != "ambiguous_license":
            raise
        tenants = ", ".join(str(t) for t in exc.error.get("tenants") or ())
        raise CommandError(
            f"license {args.license!r} exists in several tenants ({tenants}); "
            "choose one with --tenant",
            EXIT_USAGE,
        ) from None


def cmd_status(args: argparse.Namespace) -> int:
    fields = {k: v for k, v in (("tenant_id", args.tenant), ("license_id", args.license)) if v}
    body = _call(args, "status", **fields)
    if args.json:
        emit(body, True)
    else:
        print(render_status(body))
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    given = [
        flag
        for flag, value in (
            ("--session", args.session),
            ("--client", args.client),
            ("--user/--host", args.user if args.user is not None else args.host),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise CommandError(
            "revoke needs one of --session, --client, or --user and/or --host"
            + (f" (not {' and '.join(given)})" if given else ""),
            EXIT_USAGE,
        )
    if given == ["--user/--host"]:
        return _revoke_by_user(args)
    fields = {"license_id": args.license}
    if args.session is not None:
        fields["session_id"] = args.session
    else:
        fields["client_id"] = args.client
    if args.tenant:
        fields["tenant_id"] = args.tenant
    body = _call(args, "revoke", **fields)
    if args.json:
        emit(body, True)
        return 0
    _say_revoked(body)
    return 0


def _revoke_by_user(args: argparse.Namespace) -> int:
    """lmremove by user: every live lease of the user (on the host) on the license, each
    ended by the single-session ``revoke`` (its own lease.revoked event and note)."""
    fields = {"license_id": args.license, **({"tenant_id": args.tenant} if args.tenant else {})}
    (lic,) = _call(args, "status", **fields)["licenses"]
    tenant = lic["tenant_id"]
    sessions = [
        lease["session_id"]
        for lease in lic["leases"]
        if (args.user is None or lease.get("user") == args.user)
        and (args.host is None or lease.get("host") == args.host)
    ]
    whose = " ".join(
        f"{label} {value!r}" for label, value in (("user", args.user), ("host", args.host)) if value
    )
    if not sessions:
        raise CommandError(f"{whose} holds no seat on {tenant}/{args.license}", EXIT_NOT_FOUND)
    revoked = []
    for session_id in sessions:
        try:
            body = _call(
                args, "revoke", tenant_id=tenant, license_id=args.license, session_id=session_id
            )
        except CommandError as exc:
            if exc.code != EXIT_NOT_FOUND:  # ended meanwhile (released, expired): not ours
                raise
            continue
        revoked.append(body)
        if not args.json:
            _say_revoked(body)
    if args.json:
        emit({"revoked": revoked, "tenant_id": tenant, "license_id": args.license}, True)
    elif not revoked:
        print(f"{whose}: no lease left to revoke on {tenant}/{args.license} (ended meanwhile)")
    return 0


def _say_revoked(body: dict[str, Any]) -> None:
    labels = {"client_id": "client", "user": "user", "host": "host", "acquired_at": "acquired"}
    who = ", ".join(f"{label} {body[k]}" for k, label in labels.items() if body.get(k))
    print(
        f"revoked session {body['session_id']} on {body['tenant_id']}/{body['license_id']}"
        + (f" ({who})" if who else "")
        + f"; seats in use now {body['seats_used']}/{body['seats_total']}"
    )


def _bytes(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")


def render_capacity(body: dict[str, Any]) -> str:
    redis, per = body["redis"], body["bytes_per"]
    used = _bytes(redis["used_memory_bytes"])
    if redis["maxmemory_bytes"]:
        share = f"{redis['used_ratio']:.0%}"
        memory = f"{used} used of {_bytes(redis['maxmemory_bytes'])} ({share})"
    else:
        memory = f"{used} used, no maxmemory set"
    leases, backlog = body["live_leases"], body["outbox_backlog"]
    lease_bytes = _bytes(body["estimate_bytes"]["leases"])
    outbox_bytes = _bytes(body["estimate_bytes"]["outbox"])
    return "\n".join(
        [
            f"redis memory    {memory}, maxmemory-policy {redis['maxmemory_policy']}",
            f"live leases     {leases:,} (about {lease_bytes} at {per['lease']} B each)",
            f"outbox backlog  {backlog:,} events (about {outbox_bytes})",
            f"replies         about {per['reply']} B each while kept (docs/operations.md)",
        ]
    )


def cmd_capacity(args: argparse.Namespace) -> int:
    body = backend_for(args).call("capacity")
    if args.json:
        emit(body, True)
    else:
        print(render_capacity(body))
    return 0
