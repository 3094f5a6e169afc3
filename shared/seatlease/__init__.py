"""seatlease: floating-license seats on Cloud Functions, Memorystore for Redis and Cloud SQL.

Rooms, from the top (each imports only the rooms below it):
  portal      the tenant portal: its page and its actions (over admin's)
  admin       operator actions, one module per resource, one dispatch: the admin
              function's and the CLI's direct mode's ``execute(parse(body))``
  webhooks    webhooks and alerts (issue 51): payloads, signatures, URL checks, sealed
              secrets, the endpoints' and deliveries' store, delivery, alerts
  api         the HTTP boundary: request bodies and schemas (a body becomes a
              SeatRequest), API key auth, tenant rate limits and license ids, tokens and
              signing keys, the recovery flow, the seat calls' answers, domain error ->
              HTTP status, the cold start's wait, the shared runtime
  events      the reaper (sweep, outbox drain), Pub/Sub, the audit insert
  records     the database: engine, tables, store, event log, rollups, partitions,
              migrations/, reports/ (SQLAlchemy, imported lazily)
  seats       the seat engine on Redis: the engine (acquire, heartbeat, release, revoke)
              and its values, the protocol with the Lua scripts (protocol/: each
              script's named keys and arguments), the Lua seat library (lua/, loaded by
              scripts as one Redis function library), keys, ids, policy, terms, rate
              budget, failover window, connection, capacity
Shared leaves, below every room:
  fields      the field types every room validates with
  config      what a function needs from its environment
  apikeys     the API key format
  licenses    a license's configuration, shared by the engine and the store
  logs        structured JSON logs
  clock       the Redis server's clock and the RFC 3339 form
  errors      the domain errors every layer raises (api and the CLI each map them)

The rooms' order is checked by ``.importlinter`` (docs/design.md, "Package layout and
layering").

This package is the server runtime: the only code a Cloud Function archive holds besides
the function's ``main.py``. The vendor client is the separate ``seatlease_client``
distribution; the operator CLI and the local stack are ``seatlease_cli``.
"""

from seatlease._version import __version__

__all__ = ["__version__"]
