# Cloud SQL for PostgreSQL: the source of truth for tenants, API keys, licenses and the
# audit log. Private IP only (no public address), reached by the functions through the
# Cloud SQL Python Connector over Direct VPC egress, and by operators through the
# Cloud SQL Auth Proxy.

resource "google_sql_database_instance" "this" {
  #checkov:skip=CKV_GCP_79:PostgreSQL 15 is the version the schema, migrations and tests target (docs/design.md); upgrade deliberately with database_version.
  #checkov:skip=CKV2_GCP_13:log_duration=on logs every statement of a high-rate API (cost, noise); Query Insights records statement latency instead.
  project          = var.project_id
  region           = var.region
  name             = var.name
  database_version = var.database_version

  # Terraform-level guard; settings.deletion_protection_enabled is the API-level one.
  deletion_protection = var.deletion_protection

  settings {
    tier                        = var.tier
    edition                     = "ENTERPRISE"
    availability_type           = var.availability_type
    disk_type                   = "PD_SSD"
    disk_size                   = var.disk_size_gb
    disk_autoresize             = true
    deletion_protection_enabled = var.deletion_protection
    user_labels                 = var.labels

    # Only the Cloud SQL Auth Proxy and the language connectors may connect: they
    # authenticate with IAM and use mutual TLS with an ephemeral client certificate, which
    # is what ssl_mode = TRUSTED_CLIENT_CERTIFICATE_REQUIRED below demands.
    connector_enforcement = "REQUIRED"

    ip_configuration {
      ipv4_enabled                                  = false
      private_network                               = var.network_id
      allocated_ip_range                            = var.private_services_range_name
      ssl_mode                                      = "TRUSTED_CLIENT_CERTIFICATE_REQUIRED"
      enable_private_path_for_google_cloud_services = false
    }

    backup_configuration {
      enabled                        = var.backups_enabled
      point_in_time_recovery_enabled = var.backups_enabled && var.point_in_time_recovery_enabled
      start_time                     = "02:00"
      # Transaction logs exist only with point-in-time recovery; Cloud SQL also wants
      # more retained backups than days of logs, so the days are sent only then.
      transaction_log_retention_days = var.backups_enabled && var.point_in_time_recovery_enabled ? var.transaction_log_retention_days : null

      backup_retention_settings {
        retained_backups = var.backup_retained_count
        retention_unit   = "COUNT"
      }
    }

    maintenance_window {
      day          = var.maintenance_day
      hour         = var.maintenance_hour
      update_track = "stable"
    }

    insights_config {
      query_insights_enabled  = true
      record_application_tags = false
      record_client_address   = false
    }

    password_validation_policy {
      enable_password_policy      = true
      min_length                  = 20
      complexity                  = "COMPLEXITY_DEFAULT"
      disallow_username_substring = true
    }

    # IAM database authentication (DB_IAM_AUTH=1 for the functions) plus the logging
    # flags the CIS benchmark asks for.
    database_flags {
      name  = "cloudsql.iam_authentication"
      value = "on"
    }
    database_flags {
      name  = "log_checkpoints"
      value = "on"
    }
    database_flags {
      name  = "log_connections"
      value = "on"
    }
    database_flags {
      name  = "log_disconnections"
      value = "on"
    }
    database_flags {
      name  = "log_lock_waits"
      value = "on"
    }
    database_flags {
      name  = "log_min_messages"
      value = "error"
    }
    database_flags {
      name  = "log_min_error_statement"
      value = "error"
    }
    database_flags {
      name  = "log_hostname"
      value = "on"
    }
    database_flags {
      name  = "log_statement"
      value = "ddl"
    }
    database_flags {
      name  = "log_temp_files"
      value = "0"
    }
    database_flags {
      name  = "log_min_duration_statement"
      value = "-1"
    }
    database_flags {
      name  = "cloudsql.enable_pgaudit"
      value = "on"
    }
    database_flags {
      name  = "pgaudit.log"
      value = "ddl,role"
    }
    dynamic "database_flags" {
      for_each = var.max_connections == null ? [] : [var.max_connections]
      content {
        name  = "max_connections"
        value = tostring(database_flags.value)
      }
    }
  }

  # disk_size is where the disk starts: disk_autoresize grows it, and a plan against the
  # grown disk would otherwise want it back at disk_size_gb (a shrink, which Cloud SQL can
  # only do by replacing the instance, which deletion protection refuses).
  # activation_policy: the provider's default is ALWAYS; when a lost region returns after
  # a failover, its old, stale primary is stopped by hand (activation policy NEVER,
  # docs/operations.md, "When A returns"), and no later apply may start it again.
  lifecycle {
    ignore_changes = [settings[0].disk_size, settings[0].activation_policy]
  }

  # Private IP needs the private services access peering first (and on destroy the
  # peering must outlive the instance): explicit dependency on the networking connection.
  depends_on = [var.private_services_connection]
}

# deletion_policy = "ABANDON" on the database and the user: PostgreSQL refuses to drop a
# database other users are connected to and a role that owns objects or holds grants,
# which the schema's tables and the IAM users' GRANTs always make true. Destroying the
# instance removes both; a destroy that tried to drop them first would fail.
resource "google_sql_database" "app" {
  project         = var.project_id
  instance        = google_sql_database_instance.this.name
  name            = var.db_name
  deletion_policy = "ABANDON"
}

resource "google_sql_user" "app" {
  project  = var.project_id
  instance = google_sql_database_instance.this.name
  name     = var.db_user
  type     = "BUILT_IN"

  deletion_policy = "ABANDON" # see google_sql_database.app

  # Write-only: the password never lands in state or plan output.
  password_wo         = var.db_password
  password_wo_version = var.db_password_version
}

# ---------------------------------------------------------------------------------
# Two regions (replica_region set, modules/stack's two-region mode): a cross-region read
# replica of the instance above, private IP only like it, on the same tier (after a
# promotion it carries the whole load). PostgreSQL replicates asynchronously; the replica
# is promoted by Terraform (replica_promoted = true) when the first region is lost
# (docs/operations.md), which makes it a standalone instance that takes writes.
#
# replica_promoted tells Terraform that this happened: the replica is then declared
# without master_instance_name (else the plan would replace the promoted instance, the
# only copy of the data) and as a CLOUD_SQL_INSTANCE, and gets the backups and
# point-in-time recovery a primary has (Cloud SQL refuses backups on a read replica).
#
# Not replica_configuration.failover_target: that designates the legacy MySQL failover
# replica in the same region and is not supported for PostgreSQL. Enterprise Plus
# edition has a cross-region "DR replica" with a switchover that reverses the roles
# in place (replication_cluster); on Enterprise edition a promotion is one-way
# (terraform/README.md, "Two regions", says what that means for a fail-back).
# ---------------------------------------------------------------------------------

locals {
  replica_name = var.replica_region == null ? null : coalesce(var.replica_name, "${var.name}-${var.replica_region}")
}

resource "google_sql_database_instance" "replica" {
  #checkov:skip=CKV_GCP_79:PostgreSQL 15 is the version the schema, migrations and tests target (docs/design.md); the replica follows its primary's database_version.
  #checkov:skip=CKV2_GCP_13:log_duration=on logs every statement of a high-rate API (cost, noise); Query Insights records statement latency instead (as on the primary).
  count = var.replica_region == null ? 0 : 1

  project              = var.project_id
  region               = var.replica_region
  name                 = local.replica_name
  database_version     = var.database_version
  master_instance_name = var.replica_promoted ? null : google_sql_database_instance.this.name
  instance_type        = var.replica_promoted ? "CLOUD_SQL_INSTANCE" : "READ_REPLICA_INSTANCE"

  deletion_protection = var.deletion_protection

  settings {
    tier                        = var.tier
    edition                     = "ENTERPRISE"
    availability_type           = var.availability_type
    disk_type                   = "PD_SSD"
    disk_autoresize             = true
    deletion_protection_enabled = var.deletion_protection
    user_labels                 = var.labels
    connector_enforcement       = "REQUIRED"

    ip_configuration {
      ipv4_enabled                                  = false
      private_network                               = var.network_id
      allocated_ip_range                            = var.private_services_range_name
      ssl_mode                                      = "TRUSTED_CLIENT_CERTIFICATE_REQUIRED"
      enable_private_path_for_google_cloud_services = false
    }

    backup_configuration {
      enabled                        = var.replica_promoted && var.backups_enabled
      point_in_time_recovery_enabled = var.replica_promoted && var.backups_enabled && var.point_in_time_recovery_enabled
      start_time                     = "02:00"
      transaction_log_retention_days = var.replica_promoted && var.backups_enabled && var.point_in_time_recovery_enabled ? var.transaction_log_retention_days : null

      backup_retention_settings {
        retained_backups = var.backup_retained_count
        retention_unit   = "COUNT"
      }
    }

    # No disk_size: a replica starts with at least its primary's (which has grown), and
    # grows on its own. No maintenance window while a replica (replicas are maintained
    # with their primary); the promoted instance gets the primary's.
    dynamic "maintenance_window" {
      for_each = var.replica_promoted ? [1] : []
      content {
        day          = var.maintenance_day
        hour         = var.maintenance_hour
        update_track = "stable"
      }
    }

    insights_config {
      query_insights_enabled  = true
      record_application_tags = false
      record_client_address   = false
    }

    # A password policy is the primary's (a read replica has no users of its own); the
    # promoted instance gets the same.
    dynamic "password_validation_policy" {
      for_each = var.replica_promoted ? [1] : []
      content {
        enable_password_policy      = true
        min_length                  = 20
        complexity                  = "COMPLEXITY_DEFAULT"
        disallow_username_substring = true
      }
    }

    # The primary's flags, the same (tests/terraform/test_two_regions.py compares them; a
    # read replica's max_connections must not be below its primary's).
    database_flags {
      name  = "cloudsql.iam_authentication"
      value = "on"
    }
    database_flags {
      name  = "log_checkpoints"
      value = "on"
    }
    database_flags {
      name  = "log_connections"
      value = "on"
    }
    database_flags {
      name  = "log_disconnections"
      value = "on"
    }
    database_flags {
      name  = "log_lock_waits"
      value = "on"
    }
    database_flags {
      name  = "log_min_messages"
      value = "error"
    }
    database_flags {
      name  = "log_min_error_statement"
      value = "error"
    }
    database_flags {
      name  = "log_hostname"
      value = "on"
    }
    database_flags {
      name  = "log_statement"
      value = "ddl"
    }
    database_flags {
      name  = "log_temp_files"
      value = "0"
    }
    database_flags {
      name  = "log_min_duration_statement"
      value = "-1"
    }
    database_flags {
      name  = "cloudsql.enable_pgaudit"
      value = "on"
    }
    database_flags {
      name  = "pgaudit.log"
      value = "ddl,role"
    }
    dynamic "database_flags" {
      for_each = var.max_connections == null ? [] : [var.max_connections]
      content {
        name  = "max_connections"
        value = tostring(database_flags.value)
      }
    }
  }

  depends_on = [var.private_services_connection]
}
