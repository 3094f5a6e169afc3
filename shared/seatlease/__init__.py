"""seatlease: floating-license seats on Cloud Functions, Memorystore for Redis and Cloud SQL.

Modules, by job:
  keys        Redis key layout (cluster-safe hash tags, shards)
  lua/        the seat rules, as Lua scripts (one EVALSHA per call)
  scripts     loads the Lua scripts once through redis-py ``Script``
  engine      the seat engine: acquire / heartbeat / release / revoke
  clock       the Redis server's clock and the RFC 3339 form
  redisconn   the Redis client from the environment (TLS, AUTH, cluster, retries)
  errors      the domain errors every layer raises (http and the CLI each map them)
  licenses    a license's configuration, shared by the engine and the store
  schemas     pydantic request models (the HTTP contract's input side)
  http        the HTTP mapping: parse, authenticate, map errors to status codes, log
  auth        API key authentication with its caches
  runtime     process-wide engine and the license config read-through
  db, tables  the database engine and schema (migrations/ creates it)
  store       tenants, API keys, licenses, lease events (SQLAlchemy, imported lazily)
  reaper      expired-lease reclaim and outbox draining; pubsub publishes the events
  audit       event validation and idempotent insertion
  reports     usage reports over the audit trail
  admin       operator actions (the admin function and the CLI's direct mode)

The layers (http > domain > infrastructure > errors) are checked by ``.importlinter``.

This package is the server runtime: the only code a Cloud Function archive holds besides
the function's ``main.py``. The vendor client is the separate ``seatlease_client``
distribution; the operator CLI and the local stack are ``seatlease_cli``.
"""

from seatlease._version import __version__

__all__ = ["__version__"]
