variable "project_id" {
  type        = string
  description = "Google Cloud project that owns the Cloud SQL instance."
}

variable "region" {
  type        = string
  description = "Region of the Cloud SQL instance."
}

variable "name" {
  type        = string
  description = "Name of the Cloud SQL instance, e.g. \"seatlease-dev\". Cloud SQL reserves a deleted instance's name for about a week."
}

variable "network_id" {
  type        = string
  description = "Id of the VPC network that reaches the instance over private IP."
}

variable "private_services_range_name" {
  type        = string
  description = "Name of the private services access range the instance takes its private IP from."
}

variable "private_services_connection" {
  type        = string
  description = "Id of the google_service_networking_connection; the instance depends on it explicitly (private IP cannot be allocated before the peering exists)."
}

variable "database_version" {
  type        = string
  description = "Cloud SQL database version."
  default     = "POSTGRES_15"

  validation {
    condition     = startswith(var.database_version, "POSTGRES_")
    error_message = "seatlease runs on PostgreSQL (POSTGRES_15 or later)."
  }
}

variable "tier" {
  type        = string
  description = "Machine tier, e.g. db-custom-2-7680 (what envs/prod uses) or db-custom-1-3840 (envs/dev). Its max_connections (connections.tf) must hold the functions' pools: the functions module fails the plan otherwise."
  default     = "db-custom-1-3840"
}

variable "max_connections" {
  type        = number
  description = "Sets the max_connections flag (changing it restarts the instance). null: Cloud SQL's default for the tier's memory, which connections.tf knows for db-f1-micro, db-g1-small and db-custom-* tiers."
  default     = null
}

variable "availability_type" {
  type        = string
  description = "ZONAL, or REGIONAL for a standby in a second zone with automatic failover (prod)."
  default     = "REGIONAL"

  validation {
    condition     = contains(["ZONAL", "REGIONAL"], var.availability_type)
    error_message = "availability_type must be ZONAL or REGIONAL."
  }
}

variable "disk_size_gb" {
  type        = number
  description = "Initial data disk size in GB (grows automatically)."
  default     = 10
}

variable "backups_enabled" {
  type        = bool
  description = "Daily automated backups."
  default     = true
}

variable "point_in_time_recovery_enabled" {
  type        = bool
  description = "Keep transaction logs for point-in-time recovery (requires backups_enabled)."
  default     = true
}

variable "backup_retained_count" {
  type        = number
  description = "Number of automated backups kept. With point-in-time recovery, Cloud SQL wants more than transaction_log_retention_days."
  default     = 14

  validation {
    condition     = !(var.backups_enabled && var.point_in_time_recovery_enabled) || var.backup_retained_count > var.transaction_log_retention_days
    error_message = "With point-in-time recovery, backup_retained_count must be greater than transaction_log_retention_days (Cloud SQL refuses as many or fewer backups than days of logs)."
  }
}

variable "transaction_log_retention_days" {
  type        = number
  description = "Days of transaction logs kept for point-in-time recovery (1-7 on Enterprise edition); sent only when point-in-time recovery is on."
  default     = 7

  validation {
    condition     = var.transaction_log_retention_days >= 1 && var.transaction_log_retention_days <= 7
    error_message = "transaction_log_retention_days must be 1 to 7 (Enterprise edition)."
  }
}

variable "maintenance_day" {
  type        = number
  description = "Day of the weekly maintenance window, 1 (Monday) to 7 (Sunday)."
  default     = 7
}

variable "maintenance_hour" {
  type        = number
  description = "UTC hour (0-23) of the weekly maintenance window."
  default     = 4
}

variable "deletion_protection" {
  type        = bool
  description = "Refuse to destroy the instance, both in Terraform and at the API level. Set false only for throw-away test stacks."
}

variable "db_name" {
  type        = string
  description = "Name of the application database."
  default     = "seatlease"
}

variable "db_user" {
  type        = string
  description = "Name of the built-in (password) database user the functions and the CLI use."
  default     = "seatlease"
}

variable "db_password" {
  type        = string
  description = "Password of db_user. Ephemeral: it is sent to Cloud SQL as a write-only argument and never stored in state (the secrets module reads it back from Secret Manager)."
  sensitive   = true
  ephemeral   = true
}

variable "db_password_version" {
  type        = number
  description = "Bump together with the secrets module's db_password_version to roll the database password (write-only arguments are only re-sent when this changes)."
  default     = 1
}

variable "labels" {
  type        = map(string)
  description = "User labels set on the instance."
  default     = {}
}

variable "replica_region" {
  type        = string
  description = "Region of a cross-region read replica of the instance (two-region stacks: the second region); promoted by replica_promoted. null (default): no replica."
  default     = null

  validation {
    condition     = var.replica_region == null || (can(regex("^[a-z]+-[a-z]+[0-9]+$", var.replica_region)) && var.replica_region != var.region)
    error_message = "replica_region is a region name such as europe-west4, other than region."
  }
}

variable "replica_name" {
  type        = string
  description = "Name of the cross-region replica. null (default): NAME-REPLICA_REGION, e.g. seatlease-prod-europe-west4."
  default     = null
}

variable "replica_promoted" {
  type        = bool
  description = "Promote the replica: true makes the apply promote it (the provider calls PromoteReplica while the state says READ_REPLICA_INSTANCE; never promote it by hand first, docs/operations.md) and declares it a standalone instance without master_instance_name, with backups and point-in-time recovery. Keep it true afterwards: a promoted instance declared a replica again would be replaced."
  default     = false

  validation {
    condition     = !var.replica_promoted || var.replica_region != null
    error_message = "replica_promoted needs a replica (replica_region)."
  }
}
