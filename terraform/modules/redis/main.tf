# Memorystore for seatlease. Lease state lives here, so:
#   * maxmemory-policy = noeviction: the default volatile-lru would evict leases (they
#     carry TTLs) under memory pressure; with noeviction writes fail loudly instead and
#     the memory alert (monitoring module) fires at 80%.
#   * AUTH + in-transit encryption (SERVER_AUTHENTICATION, port 6378): chosen at
#     creation time, cannot be added later without recreating the instance.
#   * The server certificate rotates every 180 days with a brief disconnect: the
#     client retries with backoff (shared/seatlease/seats/redisconn.py). The CA itself is
#     valid 10 years and a new one is published 5 years in; server_ca_certs then lists
#     both, and the functions get every one of them (REDIS_CA_CERT), so the switch to
#     the new CA needs no redeploy.
#   * The server certificate names the instance by its IP (subject CN) and has no
#     subjectAltName, so clients cannot check it against the IP in REDIS_URL; the
#     functions verify the chain against this instance's own CA instead (redisconn).

locals {
  redis_configs = {
    "maxmemory-policy" = "noeviction"
  }
}

resource "google_redis_instance" "this" {
  count = var.use_cluster ? 0 : 1

  project        = var.project_id
  region         = var.region
  name           = var.name
  display_name   = "seatlease leases (${var.name})"
  tier           = var.tier
  memory_size_gb = var.memory_size_gb
  redis_version  = var.redis_version

  authorized_network = var.network_id
  connect_mode       = "PRIVATE_SERVICE_ACCESS"
  reserved_ip_range  = var.private_services_range_name

  auth_enabled            = true
  transit_encryption_mode = "SERVER_AUTHENTICATION"
  redis_configs           = local.redis_configs

  dynamic "persistence_config" {
    for_each = var.persistence_enabled ? [1] : []
    content {
      persistence_mode    = "RDB"
      rdb_snapshot_period = "ONE_HOUR"
    }
  }

  maintenance_policy {
    weekly_maintenance_window {
      day = var.maintenance_day
      start_time {
        hours   = var.maintenance_hour
        minutes = 0
        seconds = 0
        nanos   = 0
      }
    }
  }

  deletion_protection = var.deletion_protection
  labels              = var.labels

  # The private services access peering (google_service_networking_connection, passed
  # in by id) must exist before the instance is created and outlive it on destroy.
  depends_on = [var.private_services_connection]
}

# ---------------------------------------------------------------------------------
# Memorystore for Redis Cluster variant (use_cluster = true). Every key a Lua script
# touches shares one hash tag (sl:{shard}:...), so the same code runs on it.
# Redis Cluster reaches the VPC through Private Service Connect, which needs a service
# connection policy for the "gcp-memorystore-redis" service class in the network.
# Redis Cluster has no AUTH string: its only authentication mode is IAM, where every
# new connection sends an OAuth access token of a principal holding
# roles/redis.dbConnectionUser. With iam_auth (envs/prod) the cluster requires it and
# the functions send their service account's token (REDIS_IAM_AUTH=1,
# redisconn.AccessTokenCredentials, refreshed before it expires). Without it
# (AUTH_MODE_DISABLED, dev) what keeps others out is the network alone: the cluster's
# only endpoints are the Private Service Connect addresses in this VPC (subnet
# NAME-psc), the VPC holds nothing but the functions' Direct VPC egress (no VMs, no
# peering to other networks, a deny-all ingress rule), and traffic is TLS with the
# server verified against the cluster's CA. The authorization mode is chosen when the
# cluster is created (terraform/README.md says how an existing one changes).
# ---------------------------------------------------------------------------------

resource "google_network_connectivity_service_connection_policy" "redis" {
  count = var.use_cluster ? 1 : 0

  project       = var.project_id
  location      = var.region
  name          = "${var.name}-redis-psc"
  service_class = "gcp-memorystore-redis"
  description   = "Lets Memorystore for Redis Cluster create PSC endpoints for seatlease"
  network       = var.network_id

  psc_config {
    subnetworks = [var.psc_subnet_id]
  }
}

resource "google_redis_cluster" "this" {
  count = var.use_cluster ? 1 : 0

  project       = var.project_id
  region        = var.region
  name          = var.name
  shard_count   = var.cluster_shard_count
  replica_count = var.cluster_replica_count
  node_type     = var.cluster_node_type

  # No AUTH string exists for Redis Cluster: IAM or nothing (see above).
  authorization_mode      = var.iam_auth ? "AUTH_MODE_IAM_AUTH" : "AUTH_MODE_DISABLED"
  transit_encryption_mode = "TRANSIT_ENCRYPTION_MODE_SERVER_AUTHENTICATION"
  redis_configs           = local.redis_configs

  psc_configs {
    network = var.network_id
  }

  zone_distribution_config {
    mode = "MULTI_ZONE"
  }

  # Leases survive a restart of the whole cluster (maintenance gone wrong, a zone's
  # nodes and their replicas lost together) only from disk: AOF, fsync every second,
  # loses at most a second of writes; an hourly RDB snapshot would lose up to an hour of
  # grants, more than the recovery window repairs. The same on a second region's
  # secondary (it becomes the primary at a switchover). Off where persistence_enabled is
  # false (throw-away stacks).
  persistence_config {
    mode = var.persistence_enabled ? "AOF" : "DISABLED"

    dynamic "aof_config" {
      for_each = var.persistence_enabled ? [1] : []
      content {
        append_fsync = "EVERYSEC"
      }
    }
  }

  maintenance_policy {
    weekly_maintenance_window {
      day = var.maintenance_day
      start_time {
        hours   = var.maintenance_hour
        minutes = 0
        seconds = 0
        nanos   = 0
      }
    }
  }

  # Two regions (modules/stack): the second region's cluster is a secondary of the first
  # (cross-region replication, read-only until a switchover). The first cluster needs no
  # block of its own: the API records its PRIMARY role when the secondary attaches.
  dynamic "cross_cluster_replication_config" {
    for_each = var.primary_cluster_id == null ? [] : [var.primary_cluster_id]
    content {
      cluster_role = "SECONDARY"
      primary_cluster {
        cluster = cross_cluster_replication_config.value
      }
    }
  }

  deletion_protection_enabled = var.deletion_protection
  labels                      = var.labels

  # Roles change outside Terraform: `gcloud redis clusters switchover` makes the secondary
  # the primary and the old primary its secondary (terraform/README.md, "Two regions").
  # Terraform must not try to put the roles back (the provider would switch over again,
  # or detach a cluster whose block is absent), so it leaves the replication config to
  # the API after creation.
  lifecycle {
    ignore_changes = [cross_cluster_replication_config]
  }

  depends_on = [google_network_connectivity_service_connection_policy.redis]
}

locals {
  host = var.use_cluster ? google_redis_cluster.this[0].discovery_endpoints[0].address : google_redis_instance.this[0].host
  port = var.use_cluster ? google_redis_cluster.this[0].discovery_endpoints[0].port : google_redis_instance.this[0].port
  ca_cert = (var.use_cluster
    ? join("\n", flatten([for ca in google_redis_cluster.this[0].managed_server_ca[0].ca_certs : ca.certificates]))
    : join("\n", google_redis_instance.this[0].server_ca_certs[*].cert)
  )
}
