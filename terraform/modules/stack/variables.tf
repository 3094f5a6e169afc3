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
  description = "Persist the leases so that a node restart does not drop every live lease: hourly RDB snapshots of Memorystore for Redis, AOF (fsync every second) on Redis Cluster, both regions'."
  default     = true
}

variable "redis_cluster_node_type" {
  type        = string
  description = "Node type of the Redis Cluster(s) (use_redis_cluster; both regions). The default shared-core nano nodes are for dev; envs/prod sets REDIS_STANDARD_SMALL."
  default     = "REDIS_SHARED_CORE_NANO"
}

variable "redis_iam_auth" {
  type        = bool
  description = "Redis Cluster (use_redis_cluster) requires IAM authentication; the functions send their service account's access token (REDIS_IAM_AUTH). Chosen when a cluster is created: changing it replaces the cluster(s) (terraform/README.md, \"Redis Cluster and IAM authentication\"). envs/prod sets it."
  default     = false
}

variable "redis_cluster_shard_count" {
  type        = number
  description = "Shards of the Redis Cluster(s) (use_redis_cluster; a second region's secondary has the same)."
  default     = 3
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

# --------------------------------------------------------------------------------
# Two regions (terraform/README.md, "Two regions"). Unset, the stack is one region.
# --------------------------------------------------------------------------------

variable "secondary_region" {
  type        = string
  description = "A second region: every function deployed there too, the client-facing ones behind one global external Application Load Balancer, a Redis Cluster replicating the first region's (cross-region replication), a Cloud SQL cross-region read replica, and the secrets replicated to both regions. Needs use_redis_cluster. null (default): one region, the stack as before."
  default     = null

  validation {
    condition     = var.secondary_region == null || (can(regex("^[a-z]+-[a-z]+[0-9]+$", var.secondary_region)) && var.secondary_region != var.region)
    error_message = "secondary_region is a region name such as europe-west4, other than region."
  }

  validation {
    condition     = var.secondary_region == null || var.use_redis_cluster
    error_message = "secondary_region needs use_redis_cluster = true: only Memorystore for Redis Cluster replicates across regions (switching replaces the Redis instance and its leases: terraform/README.md, \"Two regions\")."
  }
}

variable "serving_region" {
  type        = string
  description = "The region that serves (two regions): the load balancer sends acquire, heartbeat, release and portal there, the reaper's scheduler job runs there and the audit push goes there. null (default): region. Set it to secondary_region after a failover (docs/operations.md), back to region after the fail-back."
  default     = null

  validation {
    condition     = var.serving_region == null || var.serving_region == var.region || (var.secondary_region != null && var.serving_region == var.secondary_region)
    error_message = "serving_region must be region or secondary_region."
  }
}

variable "sql_replica_promoted" {
  type        = bool
  description = "Promote the Cloud SQL cross-region replica: the apply that sets it promotes the replica (never by hand first: docs/operations.md, \"Fail over\"), declares it a standalone instance (with backups) and every function, in both regions, uses it. Keep it true afterwards."
  default     = false

  validation {
    condition     = !var.sql_replica_promoted || var.secondary_region != null
    error_message = "sql_replica_promoted needs secondary_region (there is no replica otherwise)."
  }
}

variable "lb_domains" {
  type        = list(string)
  description = "DNS names of the load balancer (two regions): a Google-managed certificate is created for them; point each at the load_balancer_ip output."
  default     = []

  validation {
    condition     = alltrue([for d in var.lb_domains : can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z]{2,63}$", d))])
    error_message = "lb_domains must be lower-case DNS names such as seats.example.com."
  }

  validation {
    condition     = var.secondary_region == null || length(var.lb_domains) + length(var.lb_ssl_certificates) > 0
    error_message = "Two regions need a certificate for the load balancer: lb_domains (Google-managed) or lb_ssl_certificates."
  }
}

variable "lb_ssl_certificates" {
  type        = list(string)
  description = "Ids of existing SSL certificates (projects/P/global/sslCertificates/N) the load balancer serves, besides or instead of the managed one for lb_domains."
  default     = []
}

variable "secondary_functions_subnet_cidr" {
  type        = string
  description = "Range of the second region's Direct VPC egress subnet. null (default): sized like the first region's, in 10.11.0.0/16 (network module, sizing.tf)."
  default     = null
}
