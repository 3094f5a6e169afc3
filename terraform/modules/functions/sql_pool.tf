# Cloud SQL connections: how many each instance may open, and whether all of them fit.
#
# Every instance of a function that uses the database keeps its own SQLAlchemy pool.
# Unbounded by configuration, that pool takes up to 15 connections (5 + 10 overflow), and
# the functions' maximum instances times 15 is far beyond any Cloud SQL tier. Here each
# function's pool is sized from its concurrency (DB_POOL_SIZE, with DB_MAX_OVERFLOW = 0:
# never more), and the plan fails when every function at its maximum instance count
# would hold more connections than the instance accepts less a reserve.
#
# Requests per connection: acquire, heartbeat and release query the database only on a
# Redis cache miss (API key, license, tenant rate limit: read through and cached), so one
# connection serves 80 concurrent requests; audit, admin and portal query it on every
# call (and admin and portal run the usage reports, which take longer), one connection
# per 5. A query holds its connection for milliseconds; a request
# that finds the pool busy waits for a connection, up to DB_POOL_TIMEOUT (10 s, set in
# main.tf), and then answers 503 backend_unavailable.

locals {
  sql_requests_per_connection = {
    acquire   = 80
    heartbeat = 80
    release   = 80
    audit     = 5
    admin     = 5
    portal    = 5
    # A webhooks call holds a connection while it stores deliveries and records attempts,
    # not while it waits for a receiver (up to 10 s): one per 5 requests, like audit.
    webhooks       = 5
    webhooks-retry = 1
  }

  # A function that uses SQL must be in the table above (an index error otherwise).
  sql_pool_size = {
    for fn, f in local.functions : fn => ceil(local.settings[fn].concurrency / local.sql_requests_per_connection[fn]) if f.sql
  }
  sql_connections = {
    for fn, size in local.sql_pool_size : fn => size * local.settings[fn].max_instances
  }
  sql_connections_total = sum(concat([0], values(local.sql_connections)))
  sql_connection_budget = var.sql_max_connections == null ? null : var.sql_max_connections - var.sql_reserved_connections
}

# Fails the plan (a precondition; a check block would only warn) when the functions at
# their maximum instance counts could open more connections than the budget.
resource "terraform_data" "sql_connection_budget" {
  input = {
    connections = local.sql_connections
    total       = local.sql_connections_total
    budget      = local.sql_connection_budget
  }

  lifecycle {
    precondition {
      condition     = local.sql_connection_budget != null && local.sql_connections_total <= coalesce(local.sql_connection_budget, -1)
      error_message = "The functions could open ${local.sql_connections_total} Cloud SQL connections at their maximum instance counts (${join(", ", [for fn, n in local.sql_connections : "${fn} ${local.settings[fn].max_instances} x ${local.sql_pool_size[fn]}"])}); the instance accepts ${var.sql_max_connections == null ? "an unknown number (a tier the database module has no connection limit for: set sql_max_connections)" : "${var.sql_max_connections}, of which ${var.sql_reserved_connections} are kept for operators and Cloud SQL"}. Lower max_instances or concurrency, or choose a larger sql_tier."
    }
  }
}
