"""Alembic environment: runs migrations on the connection ``seatlease.records.store.upgrade`` passes
in (or on the engine from the environment when alembic is run by hand)."""

from __future__ import annotations

from alembic import context

from seatlease.records.tables import metadata

connection = context.config.attributes.get("connection")


def run(conn: object) -> None:
    context.configure(connection=conn, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


if connection is not None:
    run(connection)
else:
    from seatlease.records.db import get_engine

    with get_engine().connect() as conn:
        run(conn)
