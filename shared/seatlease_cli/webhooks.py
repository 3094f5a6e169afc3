"""``seatlease webhook create|list|delete|rotate-secret|test|deliveries|rekey``: a tenant's
webhook endpoints (issue 51), through the admin actions ``webhook_*``
(seatlease/admin/webhooks.py); ``rekey`` is the operator's step of a ``WEBHOOK_KEY``
rotation, for every tenant at once.

``create`` and ``rotate-secret`` print the endpoint's ``whsec_`` secret once, as the last
line of stdout (with ``--json``: the ``secret`` field); nothing shows it again. A refused
URL (http in the cloud, a private, loopback or metadata address) is exit 2 with the
reason; an endpoint of another tenant, or none, is exit 3.
"""

from __future__ import annotations

import argparse
from typing import Any

from seatlease_cli.backend import backend_for, common_parent
from seatlease_cli.output import emit

ENDPOINT_COLUMNS = ["id", "url", "event_types", "license_ids", "state", "created_at"]
ATTEMPT_COLUMNS = [
    "at",
    "endpoint_id",
    "event_id",
    "type",
    "state",
    "status",
    "latency_ms",
    "error",
]


def register(subparsers: Any) -> None:
    common = common_parent()
    webhook = subparsers.add_parser(
        "webhook", help="webhook endpoints (a tenant's systems hear its seat events)"
    )
    sub = webhook.add_subparsers(dest="webhook_command", required=True, metavar="ACTION")

    create = sub.add_parser(
        "create",
        parents=[common],
        help="add an endpoint; its whsec_ secret is printed once, as the last line",
        description="Add a webhook endpoint for a tenant. Its signing secret (whsec_...) "
        "is printed once, as the last line of stdout (with --json: the 'secret' field); it "
        "is stored encrypted and never shown again (rotate-secret makes a new one).",
    )
    create.add_argument("--tenant", required=True)
    create.add_argument("--url", required=True, help="https://... (the local stack also "
                        "takes http://127.0.0.1:PORT/...)")  # fmt: skip
    create.add_argument(
        "--event",
        action="append",
        default=[],
        metavar="TYPE",
        help="only this event type (repeat for more; default: every type), e.g. "
        "lease.acquired, license.nearly_full, webhook.test",
    )
    create.add_argument(
        "--license",
        action="append",
        default=[],
        metavar="L",
        help="only this license's events (repeat for more; default: every license)",
    )
    create.set_defaults(func=cmd_create)

    listing = sub.add_parser("list", parents=[common], help="a tenant's endpoints (no secret)")
    listing.add_argument("--tenant", required=True)
    listing.set_defaults(func=cmd_list)

    for name, func, text in (
        ("delete", cmd_delete, "remove an endpoint: nothing more is sent to it"),
        (
            "rotate-secret",
            cmd_rotate_secret,
            "a new secret, printed once; the old one keeps signing beside it for 24 h",
        ),
        ("test", cmd_test, "send a webhook.test event to the endpoint now"),
    ):
        one = sub.add_parser(name, parents=[common], help=text)
        one.add_argument("--tenant", required=True)
        one.add_argument("--endpoint", required=True, metavar="ID")
        one.set_defaults(func=func)

    deliveries = sub.add_parser(
        "deliveries",
        parents=[common],
        help="the latest delivery attempts: time, status, latency, error",
    )
    deliveries.add_argument("--tenant", required=True)
    deliveries.add_argument("--endpoint", metavar="ID", help="one endpoint's (default: all)")
    deliveries.add_argument("--limit", type=int, default=100, metavar="N", help="at most N rows")
    deliveries.set_defaults(func=cmd_deliveries)

    rekey = sub.add_parser(
        "rekey",
        parents=[common],
        help="seal every endpoint's secret again under WEBHOOK_KEY's first key (a rotation)",
        description="The middle step of rotating WEBHOOK_KEY: with WEBHOOK_KEY set to "
        "'NEW,OLD' everywhere, seal every endpoint's secrets again under NEW; then set NEW "
        "alone. Secrets do not change: receivers notice nothing. Safe to run again. Exit 1 "
        "if some endpoint's secrets open under no key of WEBHOOK_KEY (they are listed).",
    )
    rekey.set_defaults(func=cmd_rekey)


def _cells(endpoint: dict[str, Any]) -> dict[str, Any]:
    return {
        **endpoint,
        "event_types": ",".join(endpoint.get("event_types") or []) or "all",
        "license_ids": ",".join(endpoint.get("license_ids") or []) or "all",
    }


def cmd_create(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"tenant_id": args.tenant, "url": args.url}
    if args.event:
        fields["event_types"] = args.event
    if args.license:
        fields["license_ids"] = args.license
    body = backend_for(args).call("webhook_create", **fields)
    if args.json:
        emit(body, True)
        return 0
    endpoint = _cells(body["endpoint"])
    print(
        f"Webhook endpoint {endpoint['id']} for tenant {endpoint['tenant_id']}: {endpoint['url']}"
    )
    print(f"events: {endpoint['event_types']}; licenses: {endpoint['license_ids']}")
    print("Its signing secret is shown only once; store it now (the receiver verifies with it):")
    print(body["secret"])  # last line of stdout, for scripts: `... | tail -n1`
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    body = backend_for(args).call("webhook_list", tenant_id=args.tenant)
    if args.json:
        emit(body, True)
    else:
        emit([_cells(e) for e in body["endpoints"]], False, ENDPOINT_COLUMNS)
        for endpoint in body["endpoints"]:
            if endpoint.get("state") == "failing":
                print(f"{endpoint['id']} is failing since {endpoint.get('failing_since')}: "
                      f"{endpoint.get('failing_reason')}")  # fmt: skip
    return 0


def _one(args: argparse.Namespace, action: str) -> dict[str, Any]:
    return backend_for(args).call(action, tenant_id=args.tenant, endpoint_id=args.endpoint)


def cmd_delete(args: argparse.Namespace) -> int:
    body = _one(args, "webhook_delete")
    if args.json:
        emit(body, True)
    else:
        print(f"deleted webhook endpoint {body['endpoint_id']} of tenant {body['tenant_id']}")
    return 0


def cmd_rotate_secret(args: argparse.Namespace) -> int:
    body = _one(args, "webhook_rotate_secret")
    if args.json:
        emit(body, True)
        return 0
    print(f"New signing secret of webhook endpoint {body['endpoint_id']}; the old one keeps "
          f"signing beside it until {body.get('old_secret_until')}.")  # fmt: skip
    print("It is shown only once; store it now:")
    print(body["secret"])  # last line of stdout
    return 0


def cmd_test(args: argparse.Namespace) -> int:
    body = _one(args, "webhook_test")
    if args.json:
        emit(body, True)
        return 0
    attempts = body.get("attempts") or []
    last = attempts[-1] if attempts else None
    if last is None:
        outcome = "not tried yet"
    elif last.get("status") is not None:
        outcome = f"HTTP {last['status']} in {last.get('latency_ms')} ms"
    else:
        outcome = f"failed: {last.get('error')}"
    print(f"sent webhook.test {body['event_id']} to {body['endpoint_id']}: {outcome}; "
          f"delivery {body['state']}")  # fmt: skip
    # delivered: 0; retried later (pending) or given up: 1, so a script sees it
    return 0 if body["state"] == "delivered" else 1


def cmd_rekey(args: argparse.Namespace) -> int:
    body = backend_for(args).call("webhook_rekey")
    unreadable = body.get("unreadable") or []
    if args.json:
        emit(body, True)
    else:
        print(f"webhook secrets under key {body['key_id']}: {body['resealed']} sealed again, "
              f"{body['current']} already")  # fmt: skip
        for endpoint_id in unreadable:
            print(f"{endpoint_id}: its secrets open under no key of WEBHOOK_KEY; left as they "
                  "are (rotate-secret makes it a new one)")  # fmt: skip
    return 1 if unreadable else 0


def cmd_deliveries(args: argparse.Namespace) -> int:
    fields: dict[str, Any] = {"tenant_id": args.tenant, "limit": args.limit}
    if args.endpoint:
        fields["endpoint_id"] = args.endpoint
    body = backend_for(args).call("webhook_deliveries", **fields)
    if args.json:
        emit(body["attempts"], True)
    else:
        emit(body["attempts"], False, ATTEMPT_COLUMNS)
    return 0
