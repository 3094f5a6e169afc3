# max_connections of the instance: what the functions' connection pools must fit in
# (modules/functions/sql_pool.tf checks the sum).
#
# Cloud SQL for PostgreSQL sets max_connections from the instance's memory when the flag
# is not set (Cloud SQL "Quotas and limits", PostgreSQL connection limits): 25 for
# db-f1-micro (0.6 GiB), 50 for db-g1-small (1.7 GiB), 100 from 3.75 GiB, 200 from 6,
# 400 from 7.5, 500 from 15, 600 from 30, 800 from 60, 1,000 from 120 GiB. A tier whose
# memory is exactly a boundary is given the lower row (db-custom-2-7680, 7.5 GiB: 200),
# so the budget never counts on the larger number. var.max_connections sets the flag
# instead (a restart of the instance when it changes) and is then the number.

locals {
  shared_core_max_connections = { "db-f1-micro" = 25, "db-g1-small" = 50 }

  # db-custom-VCPUS-MEMORY_MB; any other tier: null (unknown, the plan then fails).
  tier_memory_gib = try(tonumber(regex("^db-custom-[0-9]+-([0-9]+)$", var.tier)[0]) / 1024, null)

  # [memory above which, max_connections], largest first.
  max_connections_by_memory = [[120, 1000], [60, 800], [30, 600], [15, 500], [7.5, 400], [6, 200]]

  tier_max_connections = (
    contains(keys(local.shared_core_max_connections), var.tier) ? local.shared_core_max_connections[var.tier] :
    local.tier_memory_gib == null ? null :
    try([for row in local.max_connections_by_memory : row[1] if local.tier_memory_gib > row[0]][0], local.tier_memory_gib >= 3.75 ? 100 : null)
  )

  max_connections = var.max_connections != null ? var.max_connections : local.tier_max_connections
}
