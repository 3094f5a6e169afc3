# Secret Manager holds the two credentials of seatlease, the Memorystore AUTH string and
# the database password, and the keys that sign the lease tokens. Values are written with secret_data_wo (write-only, Terraform
# >= 1.11) so they stay out of the state of the secret versions. Accessor grants are
# made per function in the functions module, only for the functions that read them.

locals {
  redis_secret_id       = "${var.name}-redis-auth"
  db_secret_id          = "${var.name}-db-password"
  signing_key_secret_id = "${var.name}-signing-key"
}

resource "google_secret_manager_secret" "redis_auth" {
  count = var.redis_auth_enabled ? 1 : 0

  project   = var.project_id
  secret_id = local.redis_secret_id
  labels    = var.labels

  replication {
    user_managed {
      dynamic "replicas" {
        for_each = var.replica_locations
        content {
          location = replicas.value
        }
      }
    }
  }
}

resource "google_secret_manager_secret_version" "redis_auth" {
  count = var.redis_auth_enabled ? 1 : 0

  secret         = google_secret_manager_secret.redis_auth[0].id
  secret_data_wo = var.redis_auth_string
  # Write-only values are only sent when this number changes: derive it from the AUTH
  # string so that a rotated string (AUTH toggled off and on) is stored by the next apply.
  secret_data_wo_version = parseint(substr(sha256(var.redis_auth_string), 0, 8), 16)
}

resource "google_secret_manager_secret" "db_password" {
  project   = var.project_id
  secret_id = local.db_secret_id
  labels    = var.labels

  replication {
    user_managed {
      dynamic "replicas" {
        for_each = var.replica_locations
        content {
          location = replicas.value
        }
      }
    }
  }
}

# Generated on every run but never stored: it is only sent (write-only) when
# db_password_version changes, and the database user is given the value read back from
# Secret Manager, so the secret and the database always agree.
ephemeral "random_password" "db" {
  length           = 40
  special          = true
  override_special = "-_.~"
  min_lower        = 2
  min_upper        = 2
  min_numeric      = 2
  min_special      = 2
}

resource "google_secret_manager_secret_version" "db_password" {
  secret                 = google_secret_manager_secret.db_password.id
  secret_data_wo         = ephemeral.random_password.db.result
  secret_data_wo_version = var.db_password_version
}

# Read back exactly the version written above (ephemeral: not stored either) to set
# the database user's password. If an apply fails half way, the next one still gives the
# user the password that Secret Manager holds.
ephemeral "google_secret_manager_secret_version" "db_password" {
  project = var.project_id
  secret  = google_secret_manager_secret.db_password.secret_id
  version = google_secret_manager_secret_version.db_password.version
}

# The lease-token signing keys: one version per Ed25519 private key (kid = the version
# number), written by `seatlease keys rotate --secret ...` on an operator's machine, never
# by Terraform, so no private key is ever in the state or the plan. The rotate command
# also publishes each version's public key and start time in the annotations, which
# Terraform therefore leaves alone. Who may read it: the functions module.
resource "google_secret_manager_secret" "signing_key" {
  project   = var.project_id
  secret_id = local.signing_key_secret_id
  labels    = var.labels

  replication {
    user_managed {
      dynamic "replicas" {
        for_each = var.replica_locations
        content {
          location = replicas.value
        }
      }
    }
  }

  lifecycle {
    ignore_changes = [annotations]
  }
}
