"""Database engine from the environment (SQLAlchemy 2, imported only when needed), and
``transaction``: a connection in a transaction whose connection failures are
``BackendUnavailable('database')``.

- ``CLOUD_SQL_INSTANCE`` (``project:region:instance``): the Cloud SQL Python Connector over
  private IP, as ``DB_USER`` with ``DB_PASSWORD``, or IAM database auth if ``DB_IAM_AUTH=1``.
- else ``DATABASE_URL``: any SQLAlchemy URL; ``postgresql://`` and ``postgres://`` use pg8000.
- else SQLite in ``.seatlease/seatlease.db`` under the working directory, for a local run
  with nothing configured.

PostgreSQL pools (Cloud SQL and ``DATABASE_URL``): ``DB_POOL_SIZE`` connections kept,
``DB_MAX_OVERFLOW`` more opened in a burst (default 5 and 5), ``DB_POOL_TIMEOUT`` seconds
a call waits for a free one (default 30; then 503). Terraform sets them per function from
its concurrency, with no overflow, so that every instance of every function at its
maximum fits the instance's connection limit (terraform/README.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from seatlease.errors import BackendUnavailable

_lock = threading.Lock()
_engines: dict[str, Engine] = {}


def database_url() -> str:
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        path = Path.cwd() / ".seatlease" / "seatlease.db"
        return f"sqlite:///{path}"
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            return "postgresql+pg8000://" + url[len(plain) :]
    return url


def _cloud_sql_engine(instance: str) -> Engine:
    from google.cloud.sql.connector import Connector, IPTypes

    connector = Connector(refresh_strategy="lazy", ip_type=IPTypes.PRIVATE)
    iam = os.environ.get("DB_IAM_AUTH") == "1"

    def creator() -> Any:
        kwargs: dict[str, Any] = {"user": os.environ["DB_USER"], "db": os.environ["DB_NAME"]}
        if iam:
            kwargs["enable_iam_auth"] = True
        else:
            kwargs["password"] = os.environ["DB_PASSWORD"]
        return connector.connect(instance, "pg8000", **kwargs)

    return _no_delay(
        create_engine("postgresql+pg8000://", creator=creator, pool_pre_ping=True, **_pool())
    )


def _pool() -> dict[str, int]:
    """The pool's bounds from the environment: what one instance may hold open."""
    return {
        "pool_size": int(os.environ.get("DB_POOL_SIZE", "5")),
        "max_overflow": int(os.environ.get("DB_MAX_OVERFLOW", "5")),
        "pool_timeout": int(os.environ.get("DB_POOL_TIMEOUT", "30")),
    }


def _no_delay(engine: Engine) -> Engine:
    """TCP_NODELAY on every pg8000 connection. pg8000 leaves Nagle's algorithm on, so a
    statement whose messages span several TCP segments (an audit insert of 100 events,
    ~20 KB) waits for the server's delayed ACK, which more than doubles the insert's time
    (bench/NOTEBOOK.md, "Reaper and audit"). libpq sets it by default."""

    @event.listens_for(engine, "connect")
    def _set_no_delay(dbapi_conn: Any, _record: Any) -> None:
        import socket

        sock = getattr(dbapi_conn, "_usock", None)  # pg8000's socket (plain or TLS)
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    return engine


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 15})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(conn: Any, _record: Any) -> None:
            cur = conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.close()

        return engine
    kwargs: dict[str, Any] = {"pool_pre_ping": True, **_pool()}
    if url.startswith("postgresql+pg8000"):
        kwargs["connect_args"] = {"timeout": 5}
        return _no_delay(create_engine(url, **kwargs))
    return create_engine(url, **kwargs)


def get_engine() -> Engine:
    """The process-wide engine (its pool lives across invocations)."""
    instance = os.environ.get("CLOUD_SQL_INSTANCE", "").strip()
    key = f"cloudsql:{instance}" if instance else database_url()
    engine = _engines.get(key)
    if engine is None:
        with _lock:
            engine = _engines.get(key)
            if engine is None:
                engine = _cloud_sql_engine(instance) if instance else make_engine(key)
                _engines[key] = engine
    return engine


def reset() -> None:
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


@contextmanager
def transaction(engine: Engine | None = None) -> Iterator[Connection]:
    """A connection in a transaction; connection-level failures become BackendUnavailable."""
    engine = engine or get_engine()
    try:
        with engine.begin() as conn:
            yield conn
    except (TimeoutError, ConnectionError) as exc:
        # pg8000's socket gave up (its timeout, or the server went away) mid-statement:
        # raised as is, not wrapped by SQLAlchemy.
        raise BackendUnavailable("database") from exc
    except PoolTimeout as exc:  # every connection of the pool (DB_POOL_SIZE) stayed busy
        raise BackendUnavailable("database") from exc
    except (OperationalError, DBAPIError) as exc:
        if isinstance(exc, IntegrityError):
            raise
        if exc.connection_invalidated or isinstance(exc, OperationalError) or _is_network(exc):
            raise BackendUnavailable("database") from exc
        # A statement cancelled by the server's statement_timeout (or an operator): the
        # database is overloaded or busy, not the caller's fault; retrying later may work.
        if sqlstate(exc) in ("57014", "57P01", "57P03", "53300"):
            raise BackendUnavailable("database") from exc
        raise


def sqlstate(exc: DBAPIError) -> str:
    """The SQLSTATE of a driver error (pg8000 puts the server's fields in args[0])."""
    orig = getattr(exc, "orig", None)
    fields = orig.args[0] if orig is not None and orig.args else None
    return str(fields.get("C", "")) if isinstance(fields, dict) else ""


def _is_network(exc: DBAPIError) -> bool:
    # A server's error names its problem in its message ("M"); the rest of its fields
    # quote the statement (whose words, "refused" among them, say nothing of the network).
    orig = getattr(exc, "orig", None)
    fields = orig.args[0] if orig is not None and orig.args else None
    text = str(fields.get("M", "") if isinstance(fields, dict) else orig).lower()
    return any(w in text for w in ("connection", "network", "timeout", "refused", "closed"))
