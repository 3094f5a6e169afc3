# Secret Manager holds the two credentials of seatlease, the Memorystore AUTH string and
# the database password, and the keys that sign the lease tokens. Values are written with secret_data_wo (write-only, Terraform
# >= 1.11) so they stay out of the state of the secret versions. Accessor grants are
# made per function in the functions module, only for the functions that read them.

locals {
  redis_secret_id       = "${var.name}-redis-auth"
  db_secret_id          = "${var.name}-db-password"
  signing_key_secret_id = "${var.name}-signing-key"
  webhook_key_secret_id = "${var.name}-webhook-key"
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

  # Replication is immutable: a changed replica_locations would replace the secret and
  # its versions. See terraform_data.replica_locations below.
  lifecycle {
    ignore_changes = [replication]
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

  # Replication is immutable: a changed replica_locations would replace the secret and
  # its versions. See terraform_data.replica_locations below.
  lifecycle {
    ignore_changes = [replication]
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
    ignore_changes = [annotations, replication]
  }
}

# WEBHOOK_KEY: the AES-256-GCM key that encrypts the webhook endpoints' signing secrets
# in Cloud SQL (seatlease/webhooks/crypto.py), base64 of 32 bytes. Generated here and
# written write-only, never stored in the state or the plan: the SHA-256 of a 64-character
# random password (about 380 bits in, the full 256 bits out). Written once
# (secret_data_wo_version is fixed): a key that simply replaced it would leave every
# stored secret undecryptable. Rotation is the operator's, by hand, with the old and new
# keys side by side and `seatlease webhook rekey` in between: docs/operations.md
# ("WEBHOOK_KEY").
resource "google_secret_manager_secret" "webhook_key" {
  project   = var.project_id
  secret_id = local.webhook_key_secret_id
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
    ignore_changes = [replication]
  }
}

ephemeral "random_password" "webhook_key" {
  length  = 64
  special = false
}

resource "google_secret_manager_secret_version" "webhook_key" {
  secret                 = google_secret_manager_secret.webhook_key.id
  secret_data_wo         = base64sha256(ephemeral.random_password.webhook_key.result)
  secret_data_wo_version = 1
}

# Secret Manager cannot change a secret's replication after it was created: a new
# replica_locations (a second region added to a stack that exists) would replace the
# secrets, and with the signing-key secret every key version `seatlease keys rotate`
# wrote (the lease tokens' kids: the clients' pinned keys). So the secrets ignore changes
# to their replication, and this fails the plan, naming the secrets, while any of them
# is not replicated to every location: the operator replaces them deliberately
# (terraform/README.md, "Two regions", moving a stack that exists). Only with more than
# one location (a two-region stack).
locals {
  replicated_secrets = merge(
    {
      db_password = google_secret_manager_secret.db_password
      signing_key = google_secret_manager_secret.signing_key
      webhook_key = google_secret_manager_secret.webhook_key
    },
    var.redis_auth_enabled ? { redis_auth = google_secret_manager_secret.redis_auth[0] } : {},
  )
  secret_locations = {
    for key, secret in local.replicated_secrets : key => try(toset(secret.replication[0].user_managed[0].replicas[*].location), toset([]))
  }
  secrets_missing_a_location = sort([
    for key, locations in local.secret_locations : local.replicated_secrets[key].secret_id
    if length(setsubtract(toset(var.replica_locations), locations)) > 0
  ])
}

resource "terraform_data" "replica_locations" {
  count = length(var.replica_locations) > 1 ? 1 : 0

  input = var.replica_locations

  lifecycle {
    precondition {
      condition     = length(local.secrets_missing_a_location) == 0
      error_message = "Secrets ${join(", ", local.secrets_missing_a_location)} are not replicated to every one of ${join(", ", var.replica_locations)}, and Secret Manager cannot add a location to a secret: it must be replaced (-replace), which deletes its versions. Follow terraform/README.md, \"Two regions\", before adding a region to a stack that exists."
    }
  }
}
