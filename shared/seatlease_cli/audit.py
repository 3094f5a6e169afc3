"""``seatlease audit replay-dead-letters``: store the messages the audit function gave up
on (dead-lettered after its retries, e.g. during a long Cloud SQL outage).
``seatlease audit prune``: delete raw events older than the retention (the rollups stay).

Pulls from the dead-letter subscription in batches, decodes each message exactly as the
audit function does (seatlease.events.audit), inserts the events idempotently (a message that was
partly or fully stored before adds nothing twice) and acknowledges a batch only once its
events are committed. A malformed message (not JSON, invalid events) cannot be fixed by
retrying: it is acknowledged and reported with its id and a preview of its data. If the
database fails, the batch in hand is handed back to Pub/Sub at once (ack deadline 0) and
the command stops: nothing unstored is ever acknowledged.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from seatlease_cli.exits import EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_USAGE, CommandError
from seatlease_cli.output import add_json_flag

PULL_BATCH = 100  # messages per pull (each up to 100 events)
EMPTY_POLLS = 2  # consecutive empty pulls that mean "drained"
PULL_TIMEOUT = 30.0
DEFAULT_RETENTION_DAYS = 400  # 13 months and a margin: a year-on-year month is still raw


def register(subparsers: Any) -> None:
    audit = subparsers.add_parser("audit", help="the audit log of lease events")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    replay = audit_sub.add_parser(
        "replay-dead-letters",
        help="store dead-lettered event messages, then acknowledge them",
        description="Pull messages from the dead-letter subscription, store their lease "
        "events in DATABASE_URL (idempotent: already stored events are skipped) and "
        "acknowledge each batch once stored. Malformed messages are acknowledged and "
        "reported. If the database fails, nothing unstored is acknowledged (exit 5 when "
        "it is unreachable). Honours PUBSUB_EMULATOR_HOST.",
    )
    replay.add_argument(
        "--subscription",
        required=True,
        help="subscription id, or projects/P/subscriptions/S",
    )
    replay.add_argument(
        "--project", default=None, help="Google Cloud project (default GOOGLE_CLOUD_PROJECT)"
    )
    replay.add_argument(
        "--max", type=_positive, default=None, metavar="N", help="at most N messages (all)"
    )
    add_json_flag(replay)
    replay.set_defaults(func=cmd_replay)
    prune = audit_sub.add_parser(
        "prune",
        help="delete raw lease events older than the retention (the usage rollups stay)",
        description="Delete the raw lease events of every whole UTC month older than "
        f"--older-than (default {DEFAULT_RETENTION_DAYS} days, about 13 months): on "
        "PostgreSQL by dropping those months' partitions, in one transaction. The usage "
        "rollups stay, so usage reports keep covering those months; an event older than "
        "the pruned horizon that is redelivered later is not stored again. Minute rollups "
        "(minute periods of the usage reports) are kept 14 days: older ones are deleted. "
        "Also creates "
        "the partitions of this month and the next three. Needs DATABASE_URL. Run it "
        "monthly (Cloud Scheduler or cron).",
    )
    prune.add_argument(
        "--older-than",
        type=_age,
        default=timedelta(days=DEFAULT_RETENTION_DAYS),
        metavar="AGE",
        help=f"days ('400', '400d') or weeks ('60w'); default {DEFAULT_RETENTION_DAYS}d",
    )
    add_json_flag(prune)
    prune.set_defaults(func=cmd_prune)


def _age(value: str) -> timedelta:
    text = value.strip().lower()
    unit = {"d": 1, "w": 7}.get(text[-1:], None)
    number = text[:-1] if unit else text
    try:
        days = int(number) * (unit or 1)
    except ValueError:
        days = -1
    if not 1 <= days <= 36_500:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an age in days or weeks between 1d and 36500d (e.g. 400d)"
        )
    return timedelta(days=days)


def cmd_prune(args: argparse.Namespace) -> int:
    from seatlease.clock import iso_utc
    from seatlease.records import event_log
    from seatlease_cli.backend import require_database

    require_database("audit prune")
    pruned = event_log.prune_events(datetime.now(UTC) - args.older_than)
    result = {
        "horizon": iso_utc(pruned.horizon),
        "events_deleted": pruned.events_deleted,
        "partitions_dropped": pruned.partitions_dropped,
        "leases_deleted": pruned.leases_deleted,
        "minute_rollups_deleted": pruned.minute_rollups_deleted,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    dropped = ", ".join(pruned.partitions_dropped) or "none"
    print(
        f"pruned lease events before {result['horizon']}: {pruned.events_deleted} deleted "
        f"(partitions dropped: {dropped}); hourly usage rollups kept; "
        f"{pruned.minute_rollups_deleted} minute rollups older than 14 days deleted"
    )
    return 0


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number")
    return number


def subscription_path(subscription: str, project: str | None) -> str:
    if subscription.startswith("projects/"):
        return subscription
    project = project or os.environ.get("GOOGLE_CLOUD_PROJECT")
    if not project:
        raise CommandError(
            "no project: pass --project or set GOOGLE_CLOUD_PROJECT "
            "(or give the subscription as projects/P/subscriptions/S)",
            EXIT_USAGE,
        )
    return f"projects/{project}/subscriptions/{subscription}"


@dataclass
class ReplayResult:
    subscription: str
    messages: int = 0
    events: int = 0
    inserted: int = 0
    duplicates: int = 0
    malformed: list[dict[str, Any]] = field(default_factory=list)
    # single events dropped from otherwise good messages (invalid, or refused by the database)
    rejected: list[dict[str, Any]] = field(default_factory=list)


def _check_database() -> None:
    """Fail before pulling anything when the database is unreachable."""
    from sqlalchemy import text

    from seatlease.records.store import transaction

    with transaction() as conn:
        conn.execute(text("SELECT 1"))


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    orig = getattr(cause, "orig", None) or cause  # SQLAlchemy wraps the driver's error
    text = str(orig).strip().splitlines()[0] if str(orig).strip() else ""
    return f"{type(orig).__name__}: {text[:200]}" if text else type(orig).__name__


def _pubsub_failure(exc: Exception, path: str) -> CommandError:
    from google.api_core import exceptions as gexc

    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, gexc.NotFound):
        return CommandError(f"subscription {path} not found", EXIT_NOT_FOUND)
    if isinstance(exc, gexc.PermissionDenied):
        return CommandError(f"not allowed to pull from {path}: {first}")
    return CommandError(f"cannot reach Pub/Sub: {type(exc).__name__}: {first}", EXIT_UNAVAILABLE)


def replay(path: str, limit: int | None = None, subscriber: Any = None) -> ReplayResult:
    """Replay the subscription until it is empty (or ``limit`` messages). ``subscriber``:
    a SubscriberClient to use (and leave open), e.g. the local stack's, which replays
    every few seconds; by default one is made and closed."""
    from google.api_core import exceptions as gexc
    from google.cloud import pubsub_v1

    from seatlease.errors import BackendUnavailable
    from seatlease.events import audit

    _check_database()
    owned = subscriber is None
    subscriber = subscriber or pubsub_v1.SubscriberClient()
    result = ReplayResult(path)
    empty = 0
    try:
        while limit is None or result.messages < limit:
            want = PULL_BATCH if limit is None else min(PULL_BATCH, limit - result.messages)
            # return_immediately: the emulator and the service answer at once when the
            # subscription is empty instead of holding the request open.
            response = subscriber.pull(
                request={"subscription": path, "max_messages": want, "return_immediately": True},
                timeout=PULL_TIMEOUT,
            )
            received = list(response.received_messages)
            if not received:
                empty += 1
                if empty >= EMPTY_POLLS:
                    break
                time.sleep(0.5)
                continue
            empty = 0
            events: list[Any] = []
            for item in received:
                try:
                    decoded = audit.decode_events(item.message.data)
                except audit.MalformedMessage as exc:
                    result.malformed.append(
                        {
                            "message_id": item.message.message_id,
                            "error": str(exc),
                            "data": item.message.data[:200].decode("utf-8", "replace"),
                        }
                    )
                    continue
                events += decoded.events
                result.rejected += [
                    {"message_id": item.message.message_id, "error": why}
                    for why in decoded.rejected
                ]
            ack_ids = [item.ack_id for item in received]
            try:
                refused: list[str] = []
                inserted = audit.store(events, refused) if events else 0
                result.rejected += [{"message_id": None, "error": why} for why in refused]
            except BaseException as exc:
                # Hand the batch back now rather than after its ack deadline.
                try:
                    subscriber.modify_ack_deadline(
                        subscription=path, ack_ids=ack_ids, ack_deadline_seconds=0
                    )
                except gexc.GoogleAPIError:
                    pass  # they come back after the ack deadline anyway
                if isinstance(exc, BackendUnavailable):
                    raise CommandError(
                        f"cannot reach a backend: the database ({_cause(exc)}); stored "
                        f"{result.inserted} events from {result.messages} messages before "
                        "that, nothing else acknowledged",
                        EXIT_UNAVAILABLE,
                    ) from None
                raise
            subscriber.acknowledge(subscription=path, ack_ids=ack_ids)
            result.messages += len(received)
            result.events += len(events)
            result.inserted += inserted
            result.duplicates += len(events) - inserted - len(refused)
    except gexc.GoogleAPIError as exc:
        raise _pubsub_failure(exc, path) from None
    finally:
        if owned:
            subscriber.close()
    return result


def cmd_replay(args: argparse.Namespace) -> int:
    from seatlease_cli.backend import require_database

    require_database("audit replay-dead-letters")
    path = subscription_path(args.subscription, args.project)
    result = replay(path, args.max)
    if args.json:
        print(json.dumps(asdict(result), indent=2))
        return 0
    good = result.messages - len(result.malformed)
    print(
        f"replayed {good} message(s) from {path}: {result.events} events, "
        f"{result.inserted} inserted, {result.duplicates} already stored; "
        f"{len(result.malformed)} malformed, {len(result.rejected)} invalid event(s) dropped"
    )
    if result.malformed:
        print(
            f"{len(result.malformed)} malformed message(s) acknowledged and dropped:",
            file=sys.stderr,
        )
        for bad in result.malformed:
            print(f"  {bad['message_id']}: {bad['error']}; data: {bad['data']!r}", file=sys.stderr)
    if result.rejected:
        print(f"{len(result.rejected)} invalid event(s) acknowledged and dropped:", file=sys.stderr)
        for bad in result.rejected:
            print(f"  {bad['message_id']}: {bad['error']}", file=sys.stderr)
    return 0
