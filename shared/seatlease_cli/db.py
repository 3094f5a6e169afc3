"""``seatlease db upgrade``: apply the schema migrations to ``DATABASE_URL`` (or
``CLOUD_SQL_INSTANCE``), which must be set: the local stack migrates its own database."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    db = subparsers.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = db_sub.add_parser("upgrade", help="apply the Alembic migrations")
    upgrade.add_argument("--revision", default="head")
    upgrade.set_defaults(func=cmd_upgrade)


def cmd_upgrade(args: argparse.Namespace) -> int:
    from seatlease.records import db, store
    from seatlease_cli.backend import require_database

    require_database("db upgrade")
    store.upgrade(revision=args.revision)
    url = db.database_url()
    print(f"database at {url.split('@')[-1]} is at revision {args.revision}")
    return 0
