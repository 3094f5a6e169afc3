"""``seatlease license create|update|suspend|resume|show|list``.

Every change is written to the database and then to the Redis config cache at once, so
the next acquire sees it. If Redis is unreachable the change still stands, the command
says the cache refreshes within its TTL and exits with ``EXIT_CACHE_STALE`` (6).
"""

from __future__ import annotations

import argparse
from typing import Any

from seatlease.licenses import (
    IDLE_RECLAIM,
    LICENSE_FIELDS,
    MAX_IDLE_SECONDS,
    MAX_SHARE_LIMIT,
    MIN_IDLE_SECONDS,
    SHARE,
)
from seatlease.seats.engine import CONFIG_TTL_SECONDS
from seatlease_cli.backend import EXIT_CACHE_STALE, backend_for, common_parent, warn_if_stale
from seatlease_cli.output import emit

LIST_COLUMNS = (
    "tenant_id",
    "license_id",
    "seats",
    "seat_limit",
    "overage_percent",
    "lease_seconds",
    "max_lease_seconds",
    "max_borrow_seconds",
    "linger_seconds",
    "suspended",
)
TERM_COLUMNS = ("expires_at", "term_state")  # listed when some license has a term
IDLE_SHARE_COLUMNS = ("idle", "sharing")  # listed when some license reclaims idle or shares
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
CACHE_NOTE = (
    f"The change is written to the database, then to the Redis config cache so the next "
    f"acquire sees it; if Redis is unreachable the change stands, the cache refreshes within "
    f"{CONFIG_TTL_SECONDS} s and the exit code is {EXIT_CACHE_STALE}."
)


def _license_flags(parser: argparse.ArgumentParser, *, create: bool) -> None:
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--license", required=True, help="license id")
    parser.add_argument(
        "--seats", type=int, required=create, default=None, help="concurrent seats sold"
    )
    parser.add_argument(
        "--lease-seconds", type=int, default=None, help="default lease length (360 s)"
    )
    parser.add_argument(
        "--max-lease-seconds",
        type=int,
        default=None,
        help="longest lease a client may ask for (default max(3600, lease))",
    )
    parser.add_argument(
        "--overage-percent",
        type=int,
        default=None,
        help="extra seats allowed beyond --seats, in percent (25 -> 1.25x)",
    )
    parser.add_argument(
        "--max-borrow-seconds",
        type=int,
        default=None,
        help="longest borrow (a seat taken offline, no heartbeats) a client may ask for, "
        "at most 2592000 (30 days); 0 (the default) turns borrowing off",
    )
    parser.add_argument(
        "--linger-seconds",
        type=int,
        default=None,
        help="after a release the seat stays held this long for the same client_id, at "
        "most 86400; 0 (the default) frees it at once",
    )


def duration(text: str) -> int:
    """An argparse type for a length of time: ``365d``, ``12h``, ``90m``, ``30s``, ``2w``
    (a bare number is seconds)."""
    unit = text[-1:].lower()
    number = text[:-1] if unit in DURATION_UNITS else text
    try:
        value = int(number)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a length like 365d, 12h or 30s, got {text!r}"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive length, got {text!r}")
    return value * DURATION_UNITS.get(unit, 1)


def _term_flags(parser: argparse.ArgumentParser, *, create: bool) -> None:
    group = parser.add_argument_group(
        "term and entitlements",
        'when the license works and what it entitles to (docs/design.md, "Terms, grace, '
        'entitlements and versions"); times are RFC 3339 (2027-11-25 or 2027-11-25T09:00:00Z)',
    )
    group.add_argument("--starts-at", default=None, help="no seat before this time")
    group.add_argument("--expires-at", default=None, help="no new seat from this time + grace")
    group.add_argument(
        "--grace-seconds",
        type=int,
        default=None,
        help="the license keeps working this long after --expires-at (at most 7776000, "
        "90 days; default 0)",
    )
    group.add_argument(
        "--on-expiry",
        choices=("end_leases", "keep_leases"),
        default=None,
        help="at the end (+ grace): end the held leases (default) or let them run until released",
    )
    group.add_argument(
        "--entitlement",
        action="append",
        metavar="NAME",
        help="a feature the license includes (repeatable; the given ones replace the set)",
    )
    group.add_argument(
        "--max-version", default=None, help="the highest product version entitled (2026.4)"
    )
    group.add_argument(
        "--on-failover",
        choices=("hold", "grant"),
        default=None,
        help="in a failover's recovery window (seatlease failover begin): hold new seats "
        "until the holders the new primary lost are back (default: no seat granted twice), "
        "or grant them (availability first: the license may run over by those holders)",
    )
    if not create:
        group.add_argument(
            "--renew-for",
            type=duration,
            default=None,
            metavar="LENGTH",
            help="move --expires-at this much later (365d), from the later of now and the "
            "current end",
        )
        group.add_argument(
            "--clear-term", action="store_true", help="no start, no end: perpetual again"
        )
        group.add_argument(
            "--clear-entitlements", action="store_true", help="remove every entitlement"
        )
        group.add_argument(
            "--clear-max-version", action="store_true", help="any version is entitled"
        )


def _idle_share_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "idle and shared seats",
        "reclaim the seats of idle products, let sessions share a seat (docs/design.md, "
        '"Idle seats" and "Shared seats"); both off by default',
    )
    group.add_argument(
        "--idle-timeout",
        dest="idle_timeout_seconds",
        type=int,
        default=None,
        metavar="SECONDS",
        help=f"a lease whose product reports no user activity this long is warned, then "
        f"reclaimed: {MIN_IDLE_SECONDS} to {MAX_IDLE_SECONDS} (a week); 0 (the default) "
        f"never reclaims an idle seat",
    )
    group.add_argument(
        "--idle-reclaim",
        dest="idle_reclaim",
        choices=IDLE_RECLAIM,
        default=None,
        help="reclaim a warned idle lease only when another client needs the seat "
        "(when_needed, the default) or at once (always)",
    )
    group.add_argument(
        "--share",
        dest="share",
        choices=SHARE,
        default=None,
        help="leases of the same user, host, or both (user_host) count as one seat; "
        "none (the default) shares nothing",
    )
    group.add_argument(
        "--share-limit",
        dest="share_limit",
        type=int,
        default=None,
        metavar="N",
        help=f"at most N sessions a shared seat (at most {MAX_SHARE_LIMIT}); 0 (the "
        f"default) is no limit",
    )


IDLE_SHARE_FIELDS = ("idle_timeout_seconds", "idle_reclaim", "share", "share_limit")
ALERT_FIELDS = ("alert_full_percent", "alert_full_minutes", "alert_denials")


def _alert_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "alerts",
        "webhook alerts the service sends about the license (issue 51: license.nearly_full "
        "and license.capacity_ok, license.denials); term_ending needs no setting",
    )
    group.add_argument(
        "--alert-full-percent",
        dest="alert_full_percent",
        type=int,
        default=None,
        metavar="P",
        help="send license.nearly_full when seats in use reach P %% of the seats (0 to "
        "1000; 0, the default, is off), then license.capacity_ok when they fall below",
    )
    group.add_argument(
        "--alert-full-minutes",
        dest="alert_full_minutes",
        type=int,
        default=None,
        metavar="M",
        help="... for M minutes in a row (1 to 1440; default 5)",
    )
    group.add_argument(
        "--alert-denials",
        dest="alert_denials",
        type=int,
        default=None,
        metavar="N",
        help="send license.denials for an hour with N or more true denials (clients "
        "refused that gave up; 0, the default, is off)",
    )


def alerts_text(lic: dict[str, Any]) -> str:
    """One line for ``license show``: ``off``, or ``nearly full at 80 % for 5 min;
    denials at 10 an hour``."""
    parts = []
    if lic.get("alert_full_percent"):
        minutes = lic.get("alert_full_minutes") or 5
        parts.append(f"nearly full at {lic['alert_full_percent']} % for {minutes} min")
    if lic.get("alert_denials"):
        parts.append(f"denials at {lic['alert_denials']} an hour")
    return "; ".join(parts) or "off"


def idle_text(lic: dict[str, Any]) -> str:
    """One line for ``license show`` and a cell for ``license list``: ``off``, or
    ``after 900 s, reclaimed when_needed``."""
    seconds = lic.get("idle_timeout_seconds") or 0
    if not seconds:
        return "off"
    return f"after {seconds} s, reclaimed {lic.get('idle_reclaim', 'when_needed')}"


def sharing_text(lic: dict[str, Any]) -> str:
    """``none``, or ``by user, no limit`` / ``by user_host, 4 sessions a seat``."""
    share = lic.get("share") or "none"
    if share == "none":
        return "none"
    limit = lic.get("share_limit") or 0
    return f"by {share}, {f'{limit} sessions a seat' if limit else 'no limit'}"


def _term_settings(args: argparse.Namespace) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for name in (
        "starts_at",
        "expires_at",
        "grace_seconds",
        "on_expiry",
        "max_version",
        "on_failover",
    ):
        if getattr(args, name, None) is not None:
            settings[name] = getattr(args, name)
    if args.entitlement:
        settings["entitlements"] = list(args.entitlement)
    if getattr(args, "renew_for", None) is not None:
        settings["renew_for_seconds"] = args.renew_for
    for flag in ("clear_term", "clear_entitlements", "clear_max_version"):
        if getattr(args, flag, False):
            settings[flag] = True
    return settings


def term_text(lic: dict[str, Any]) -> str:
    """One line for ``license show``: the server's ``term_text`` (``expires 2027-11-25
    (in 364 days)``), then the grace and what happens at the end."""
    parts = [lic.get("term_text") or "perpetual"]
    if lic.get("expires_at"):
        if lic.get("grace_seconds"):
            parts.append(f"grace {lic['grace_seconds']} s")
        parts.append(lic.get("on_expiry", "end_leases"))
    return ", ".join(parts)


def _named(kind: str, convert: Any) -> Any:
    """An argparse type for NAME=VALUE (--group eng=ann,bob; --reserve eng=2)."""

    def parse(text: str) -> tuple[str, Any]:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"expected NAME={kind}, got {text!r}")
        try:
            return name, convert(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected NAME={kind}, got {text!r}") from None

    return parse


def _user_list(text: str) -> list[str]:
    return [user for user in text.split(",") if user]


def _policy_flags(parser: argparse.ArgumentParser, *, create: bool) -> None:
    group = parser.add_argument_group(
        "policy",
        "per-user limit, reserved seats, deny list and wait queue (docs/design.md, "
        '"License policy and the wait queue")'
        + ("" if create else "; given flags change the current policy, the rest stays"),
    )
    group.add_argument(
        "--max-per-user", type=int, default=None, help="live leases per user at most; 0: off"
    )
    group.add_argument(
        "--group",
        action="append",
        type=_named("USER,USER,...", _user_list),
        metavar="NAME=USERS",
        help="a named group of users (repeatable; replaces that group's list)",
    )
    group.add_argument(
        "--reserve",
        action="append",
        type=_named("N", int),
        metavar="NAME=N",
        help="seats only members of group NAME may take (repeatable)",
    )
    group.add_argument(
        "--deny-user",
        action="append",
        metavar="USER",
        help="a user refused any seat (repeatable; the given ones replace the list)",
    )
    group.add_argument(
        "--queue",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="let clients wait in a fair queue on a full license (202 and a ticket)",
    )
    group.add_argument(
        "--queue-ticket-seconds",
        type=int,
        default=None,
        help="a ticket not renewed within this drops out (default 60)",
    )
    group.add_argument(
        "--queue-hold-seconds",
        type=int,
        default=None,
        help="a freed seat waits this long for the queue's head (default 30)",
    )
    group.add_argument(
        "--queue-max",
        type=int,
        default=None,
        help="at most this many clients wait (default 10 per seat, at most 10,000; "
        "beyond it 409 queue_full)",
    )
    if not create:
        group.add_argument(
            "--clear-policy", action="store_true", help="remove the license's policy"
        )


def _policy_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The policy fields the flags set (groups and reservations by name)."""
    changes: dict[str, Any] = {}
    for flag in (
        "max_per_user",
        "queue",
        "queue_ticket_seconds",
        "queue_hold_seconds",
        "queue_max",
    ):
        if getattr(args, flag, None) is not None:
            changes[flag] = getattr(args, flag)
    if args.group:
        changes["groups"] = dict(args.group)
    if args.reserve:
        changes["reserve"] = dict(args.reserve)
    if args.deny_user:
        changes["deny_users"] = list(args.deny_user)
    return changes


def _merged_policy(current: dict[str, Any] | None, changes: dict[str, Any]) -> dict[str, Any]:
    policy = dict(current or {})
    for name in ("groups", "reserve"):
        if name in changes:
            policy[name] = {**policy.get(name, {}), **changes.pop(name)}
    return {**policy, **changes}


def policy_text(policy: dict[str, Any] | None) -> str:
    """One line for ``license show``: ``max 2 per user; group eng=ann,bob ...``."""
    if not policy:
        return "none"
    parts = []
    if policy.get("max_per_user"):
        parts.append(f"max {policy['max_per_user']} per user")
    for name, users in sorted(policy.get("groups", {}).items()):
        reserved = policy.get("reserve", {}).get(name, 0)
        parts.append(f"group {name}={','.join(users)} (reserve {reserved})")
    if policy.get("deny_users"):
        parts.append(f"deny {','.join(policy['deny_users'])}")
    if policy.get("queue"):
        bound = policy.get("queue_max")
        parts.append(
            f"queue on (ticket {policy['queue_ticket_seconds']} s, "
            f"hold {policy['queue_hold_seconds']} s, "
            f"at most {bound if bound else '10 per seat'} waiting)"
        )
    return "; ".join(parts) or "none"


def register(subparsers: Any) -> None:
    common = common_parent()
    lic = subparsers.add_parser("license", help="licenses: seats, lease length, suspension")
    sub = lic.add_subparsers(dest="license_command", required=True, metavar="ACTION")

    create = sub.add_parser(
        "create", parents=[common], help="add a license", description=CACHE_NOTE
    )
    _license_flags(create, create=True)
    _policy_flags(create, create=True)
    _term_flags(create, create=True)
    _idle_share_flags(create)
    _alert_flags(create)
    create.set_defaults(func=cmd_create)

    update = sub.add_parser(
        "update", parents=[common], help="change a license", description=CACHE_NOTE
    )
    _license_flags(update, create=False)
    _policy_flags(update, create=False)
    _term_flags(update, create=False)
    _idle_share_flags(update)
    _alert_flags(update)
    state = update.add_mutually_exclusive_group()
    state.add_argument(
        "--suspend", dest="suspended", action="store_const", const=True, help="refuse acquires"
    )
    state.add_argument(
        "--resume", dest="suspended", action="store_const", const=False, help="accept again"
    )
    update.set_defaults(func=cmd_update, suspended=None)

    aliases = (
        ("suspend", "refuse acquires (live leases go on; revoke ends them)"),
        ("resume", "accept new seats again"),
    )
    for name, verb in aliases:
        alias = sub.add_parser(name, parents=[common], help=verb, description=CACHE_NOTE)
        alias.add_argument("--tenant", required=True)
        alias.add_argument("--license", required=True, help="license id")
        alias.set_defaults(func=cmd_suspend, suspended=name == "suspend")

    show = sub.add_parser("show", parents=[common], help="one license's settings")
    show.add_argument("--tenant", required=True)
    show.add_argument("--license", required=True, help="license id")
    show.set_defaults(func=cmd_show)

    listing = sub.add_parser("list", parents=[common], help="licenses, of one tenant or all")
    listing.add_argument("--tenant", default=None)
    listing.add_argument(
        "--expiring",
        type=duration,
        default=None,
        metavar="LENGTH",
        help="only licenses whose term ends within LENGTH (30d), or in their grace now",
    )
    listing.set_defaults(func=cmd_list)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    named = (*LICENSE_FIELDS[:7], *IDLE_SHARE_FIELDS, *ALERT_FIELDS)
    settings = {n: getattr(args, n) for n in named if getattr(args, n, None) is not None}
    return {**settings, **_term_settings(args)}


def _shown(lic: dict[str, Any]) -> dict[str, Any]:
    """A license as ``show`` and a change print it: the policy and the term as lines."""
    hidden = (*TERM_DETAILS, *IDLE_SHARE_FIELDS, *ALERT_FIELDS)
    shown = {k: v for k, v in lic.items() if k not in hidden}
    shown["alerts"] = alerts_text(lic)
    shown["idle"] = idle_text(lic)
    shown["sharing"] = sharing_text(lic)
    shown["policy"] = policy_text(lic.get("policy"))
    shown["term"] = term_text(lic)
    shown["entitlements"] = ", ".join(lic.get("entitlements") or []) or "none"
    shown["max_version"] = lic.get("max_version") or "any"
    return shown


# shown as the one "term" line (its grace and on_expiry only when it has an end)
TERM_DETAILS = ("starts_at", "grace_ends_at", "expires_in_days", "term_state", "term_text",
                "grace_seconds", "on_expiry")  # fmt: skip


def _print_change(args: argparse.Namespace, body: dict[str, Any], verb: str) -> int:
    if args.json:
        emit(body, True)
    else:
        lic = body["license"]
        print(f"{verb} license {lic['tenant_id']}/{lic['license_id']}")
        cache = "refreshed" if body.get("cache_refreshed") else "stale"
        emit({**_shown(lic), "cache": cache}, False)
    return warn_if_stale(body)


def cmd_create(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if policy := _policy_changes(args):
        settings["policy"] = policy
    body = backend_for(args).call(
        "license.create", tenant_id=args.tenant, license_id=args.license, **settings
    )
    return _print_change(args, body, "created")


def cmd_update(args: argparse.Namespace) -> int:
    backend = backend_for(args)
    settings = _settings(args)
    if args.clear_policy:
        settings["clear_policy"] = True
    elif policy := _policy_changes(args):
        current = backend.call("license.show", tenant_id=args.tenant, license_id=args.license)
        settings["policy"] = _merged_policy(current["license"].get("policy"), policy)
    body = backend.call(
        "license.update", tenant_id=args.tenant, license_id=args.license, **settings
    )
    return _print_change(args, body, "updated")


def cmd_suspend(args: argparse.Namespace) -> int:
    action = "license.suspend" if args.suspended else "license.resume"
    body = backend_for(args).call(action, tenant_id=args.tenant, license_id=args.license)
    return _print_change(args, body, "suspended" if args.suspended else "resumed")


def cmd_show(args: argparse.Namespace) -> int:
    body = backend_for(args).call("license.show", tenant_id=args.tenant, license_id=args.license)
    lic = body["license"]
    emit(body if args.json else _shown(lic), args.json)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"tenant_id": args.tenant} if args.tenant else {}
    if args.expiring is not None:
        fields["expiring_within_seconds"] = args.expiring
    body = backend_for(args).call("license.list", **fields)
    licenses = body["licenses"]
    termed = any(lic.get("term_state", "perpetual") != "perpetual" for lic in licenses)
    columns = LIST_COLUMNS + TERM_COLUMNS if termed or args.expiring else LIST_COLUMNS
    rows = [{**lic, "idle": idle_text(lic), "sharing": sharing_text(lic)} for lic in licenses]
    if any(row["idle"] != "off" or row["sharing"] != "none" for row in rows):
        columns += IDLE_SHARE_COLUMNS
    emit(body if args.json else rows, args.json, columns)
    return 0
