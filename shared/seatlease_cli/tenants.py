"""``seatlease tenant create|update|show|list`` and ``seatlease apikey create|list|revoke``."""

from __future__ import annotations

import argparse
from typing import Any

from seatlease.api.auth import LOCAL_TTL
from seatlease.api.tenantlimits import DEFAULT_RATE_LIMIT
from seatlease_cli.backend import backend_for, common_parent, warn_if_stale
from seatlease_cli.output import emit

RATE_LIMIT_HELP = (
    "calls per second on acquire, heartbeat and release, per license shard (0: no limit; "
    f"default {DEFAULT_RATE_LIMIT}); over it the calls get 429 rate_limited"
)


def register(subparsers: Any) -> None:
    common = common_parent()

    tenant = subparsers.add_parser("tenant", help="tenants (the customers owning licenses)")
    tenant_sub = tenant.add_subparsers(dest="tenant_command", required=True, metavar="ACTION")
    create = tenant_sub.add_parser("create", parents=[common], help="add a tenant")
    create.add_argument("tenant", metavar="TENANT", help="tenant id (A-Z a-z 0-9 . _ : @ -)")
    create.add_argument("--name", default="", help="display name")
    create.add_argument("--rate-limit", type=int, metavar="N", help=RATE_LIMIT_HELP)
    create.set_defaults(func=cmd_tenant_create)
    update = tenant_sub.add_parser("update", parents=[common], help="change a tenant")
    update.add_argument("tenant", metavar="TENANT")
    update.add_argument("--name", help="display name")
    update.add_argument("--rate-limit", type=int, metavar="N", help=RATE_LIMIT_HELP)
    update.set_defaults(func=cmd_tenant_update)
    show = tenant_sub.add_parser("show", parents=[common], help="one tenant's settings")
    show.add_argument("tenant", metavar="TENANT")
    show.set_defaults(func=cmd_tenant_show)
    listing = tenant_sub.add_parser("list", parents=[common], help="list the tenants")
    listing.set_defaults(func=cmd_tenant_list)

    apikey = subparsers.add_parser("apikey", help="API keys (clients authenticate with them)")
    key_sub = apikey.add_subparsers(dest="apikey_command", required=True, metavar="ACTION")
    create = key_sub.add_parser(
        "create",
        parents=[common],
        help="make a key for a tenant; it is printed once, as the last line",
        description="Make an API key. The key is printed once, as the last line of stdout "
        "(with --json: the 'key' field); only its SHA-256 is stored.",
    )
    create.add_argument("--tenant", required=True)
    create.add_argument("--label", default="", help="what the key is for (shown in list)")
    create.add_argument(
        "--scope",
        choices=("seat", "admin"),
        default="seat",
        help="seat (default): acquire, heartbeat and release only; admin: the tenant's "
        "portal (sees and frees its seats, manages its seat keys), never takes a seat",
    )
    create.set_defaults(func=cmd_apikey_create)
    listing = key_sub.add_parser("list", parents=[common], help="list a tenant's keys")
    listing.add_argument("--tenant", required=True)
    listing.set_defaults(func=cmd_apikey_list)
    revoke = key_sub.add_parser(
        "revoke",
        parents=[common],
        help="revoke a key by its prefix",
        description="Revoke an API key by its prefix (sl_xxxxxxxx). The database and the "
        "shared Redis cache forget it at once; running function instances keep their "
        f"in-process copy for at most {LOCAL_TTL:.0f} s (seatlease.api.auth.LOCAL_TTL), so the key "
        f"stops working everywhere within {LOCAL_TTL:.0f} s.",
    )
    revoke.add_argument("prefix", metavar="PREFIX")
    revoke.set_defaults(func=cmd_apikey_revoke)


def _rate(args: argparse.Namespace) -> dict[str, Any]:
    return {} if args.rate_limit is None else {"rate_limit_per_second": args.rate_limit}


def _describe(tenant: dict[str, Any]) -> str:
    name = f" ({tenant['name']})" if tenant["name"] else ""
    limit = tenant["rate_limit_per_second"]
    rate = f"rate limit {limit} calls/s per license shard" if limit else "no rate limit"
    return f"{tenant['tenant_id']}{name}, {rate}"


def cmd_tenant_create(args: argparse.Namespace) -> int:
    body = backend_for(args).call(
        "tenant.create", tenant_id=args.tenant, name=args.name, **_rate(args)
    )
    if args.json:
        emit(body, True)
    else:
        tenant = body["tenant"]
        name = f" ({tenant['name']})" if tenant["name"] else ""
        print(f"created tenant {tenant['tenant_id']}{name}")  # the setting: `tenant show`
    return 0


def cmd_tenant_update(args: argparse.Namespace) -> int:
    changes = _rate(args) | ({} if args.name is None else {"name": args.name})
    body = backend_for(args).call("tenant.update", tenant_id=args.tenant, **changes)
    if args.json:
        emit(body, True)
    else:
        print(f"updated tenant {_describe(body['tenant'])}")
        if "rate_limit_per_second" in changes:
            print(f"(function instances apply it within {LOCAL_TTL:.0f} s)")
        return warn_if_stale(body)
    return 0


def cmd_tenant_show(args: argparse.Namespace) -> int:
    body = backend_for(args).call("tenant.show", tenant_id=args.tenant)
    if args.json:
        emit(body, True)
    else:
        emit([body["tenant"]], False, ["tenant_id", "name", "rate_limit_per_second", "created_at"])
    return 0


def cmd_tenant_list(args: argparse.Namespace) -> int:
    body = backend_for(args).call("tenant.list")
    if args.json:
        emit(body, True)
    else:
        emit(body["tenants"], False, ["tenant_id", "name", "rate_limit_per_second", "created_at"])
    return 0


def cmd_apikey_create(args: argparse.Namespace) -> int:
    # The scope is sent only when it is not the default, so a seat key can still be made
    # through an admin function deployed before scopes existed.
    scope = {"scope": args.scope} if args.scope != "seat" else {}
    body = backend_for(args).call("apikey.create", tenant_id=args.tenant, label=args.label, **scope)
    if args.json:
        emit(body, True)
        return 0
    label = f", label {body['label']!r}" if body["label"] else ""
    kind = "Tenant admin key" if body.get("scope") == "admin" else "API key"
    print(f"{kind} {body['prefix']} for tenant {body['tenant_id']}{label}.")
    print("It is shown only once; store it now (clients send 'Authorization: Bearer <key>'):")
    print(body["key"])  # last line of stdout, for scripts: `... | tail -n1`
    return 0


def cmd_apikey_list(args: argparse.Namespace) -> int:
    body = backend_for(args).call("apikey.list", tenant_id=args.tenant)
    if args.json:
        emit(body, True)
    else:
        columns = ["prefix", "label", "scope", "active", "created_at", "revoked_at"]
        emit(body["api_keys"], False, columns)
    return 0


def cmd_apikey_revoke(args: argparse.Namespace) -> int:
    body = backend_for(args).call("apikey.revoke", prefix=args.prefix)
    if args.json:
        emit(body, True)
    else:
        print(
            f"revoked API key {body['prefix']}; running functions may still accept it for up "
            f"to {body['local_cache_seconds']:.0f} s (their in-process cache)"
        )
    return warn_if_stale(body)
