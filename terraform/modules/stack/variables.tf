# Defaults are the production-grade shapes; envs/dev passes smaller ones. Every size the
# environments choose differently is an input here, so an environment is one module call.

variable "project_id" {
  type        = string
  description = "Google Cloud project to deploy into (one environment per project: function URLs are https://REGION-PROJECT.cloudfunctions.net/NAME)."
}

variable "region" {
  type        = string
  description = "Region of every regional resource (functions, Redis, Cloud SQL, subnets, scheduler, secret replicas)."
}

variable "environment" {
  type        = string
  description = "Environment name, e.g. \"dev\" or \"prod\"; set as the env label on every resource that takes labels."
}

variable "name" {
  type        = string
  description = "Prefix of resource names, e.g. \"seatlease-dev\" (3-14 characters, a-z 0-9 -: service account ids are limited to 30)."
}

variable "enable_apis" {
  type        = bool
  description = "Enable the Google APIs the stack needs (needs serviceusage.services.enable); APIs are never disabled on destroy."
  default     = true
}

variable "api_propagation_wait" {
  type        = string
  description = "How long to wait after enabling the APIs before creating anything that uses them (newly enabled APIs and their service agents take a moment to become usable)."
  default     = "90s"

  validation {
    condition     = can(regex("^[0-9]+[smh]$", var.api_propagation_wait))
    error_message = "api_propagation_wait is a duration such as 90s or 2m."
  }
}

variable "use_redis_cluster" {
  type        = bool
  description = "Use Memorystore for Redis Cluster (PSC, no AUTH string, REDIS_CLUSTER=1) instead of Memorystore for Redis."
  default     = false
}

variable "redis_tier" {
  type        = string
  description = "Memorystore for Redis tier: STANDARD_HA (replica, automatic failover) or BASIC (single node, dev only)."
  default     = "STANDARD_HA"
}

variable "redis_memory_size_gb" {
  type        = number
  description = "Memory of the Memorystore for Redis instance in GiB."
  default     = 5
}

variable "redis_persistence_enabled" {
  type        = bool
  description = "Take hourly RDB snapshots of Memorystore for Redis so that a node restart does not drop every live lease."
  default     = true
}

variable "sql_tier" {
  type        = string
  description = "Cloud SQL machine tier, e.g. db-custom-2-7680 (prod) or db-custom-1-3840 (dev). Its max_connections (by memory) must hold every function's pool at its maximum instance count: the plan fails otherwise (see terraform/README.md)."
  default     = "db-custom-2-7680"
}

variable "sql_max_connections" {
  type        = number
  description = "Set Cloud SQL's max_connections flag (changing it restarts the instance); null keeps the tier's default (by memory), which the connection budget of the functions then uses."
  default     = null
}

variable "sql_availability_type" {
  type        = string
  description = "ZONAL, or REGIONAL Cloud SQL (standby in a second zone, automatic failover)."
  default     = "REGIONAL"
}

variable "sql_point_in_time_recovery" {
  type        = bool
  description = "Keep transaction logs for point-in-time recovery (daily backups are always on)."
  default     = true
}

variable "sql_backup_retained_count" {
  type        = number
  description = "Number of daily Cloud SQL backups kept."
  default     = 30
}

variable "deletion_protection" {
  type        = bool
  description = "Protect Cloud SQL and Redis from deletion. No default on purpose: every environment says it (false only for throw-away stacks)."
}

variable "db_password_version" {
  type        = number
  description = "Bump to generate and apply a new database password (see terraform/README.md)."
  default     = 1
}

variable "db_iam_auth" {
  type        = bool
  description = "Functions connect to Cloud SQL with IAM database authentication instead of the password."
  default     = false
}

variable "admin_invokers" {
  type        = list(string)
  description = "IAM members allowed to call the admin function, e.g. [\"group:seatlease-ops@example.com\"]."
  default     = []
}

variable "notification_channels" {
  type        = list(string)
  description = "Monitoring notification channel ids (projects/P/notificationChannels/N) the alerts notify."
  default     = []
}

variable "function_settings" {
  type = map(object({
    min_instances   = optional(number)
    max_instances   = optional(number)
    concurrency     = optional(number)
    cpu             = optional(string)
    memory          = optional(string)
    timeout_seconds = optional(number)
  }))
  description = "Per-function scaling overrides by function name (see the functions module)."
  default     = {}
}

variable "functions_subnet_cidr" {
  type        = string
  description = "Range of the functions' Direct VPC egress subnet. null (default): sized from the functions' max_instance_count (network module, sizing.tf); a range given here must hold as much, or the plan fails."
  default     = null
}

variable "log_level" {
  type        = string
  description = "LOG_LEVEL of the functions."
  default     = "INFO"
}

variable "python" {
  type        = string
  description = "Python 3.11+ interpreter that builds the function archives at plan time."
  default     = "python3"
}
