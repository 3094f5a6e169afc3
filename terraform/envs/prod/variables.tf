# What an operator sets per deployment (terraform.tfvars). The prod sizes are in main.tf;
# every input is documented in modules/stack/variables.tf.

variable "project_id" {
  type        = string
  description = "Google Cloud project to deploy into (one environment per project: function URLs are https://REGION-PROJECT.cloudfunctions.net/NAME)."
}

variable "region" {
  type        = string
  description = "Region of every regional resource."
  default     = "europe-west1"
}

variable "name" {
  type        = string
  description = "Prefix of resource names (3-14 characters, a-z 0-9 -)."
  default     = "seatlease-prod"
}

variable "deletion_protection" {
  type        = bool
  description = "Protect Cloud SQL and Redis from deletion (keep true in prod)."
  default     = true
}

variable "log_level" {
  type        = string
  description = "LOG_LEVEL of the functions."
  default     = "INFO"
}

variable "enable_apis" {
  type        = bool
  description = "Enable the Google APIs the stack needs (needs serviceusage.services.enable)."
  default     = true
}

variable "use_redis_cluster" {
  type        = bool
  description = "Use Memorystore for Redis Cluster instead of Memorystore for Redis."
  default     = false
}

variable "redis_cluster_node_type" {
  type        = string
  description = "Node type of the Redis Cluster(s) (use_redis_cluster; both regions). REDIS_STANDARD_SMALL: 2 dedicated vCPUs, 6.5 GB per node; never the shared-core nano of dev in prod (docs/operations.md, \"The standby\", has the costs)."
  default     = "REDIS_STANDARD_SMALL"
}

variable "redis_cluster_shard_count" {
  type        = number
  description = "Shards of the Redis Cluster(s) (each with one replica; a second region's secondary has the same)."
  default     = 3
}

variable "redis_iam_auth" {
  type        = bool
  description = "Redis Cluster requires IAM authentication (the functions send their access token). Set false only for a cluster created without it, until it is replaced (terraform/README.md)."
  default     = true
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
  description = "Monitoring notification channel ids the alerts notify."
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
  description = "Per-function scaling overrides (see the functions module)."
  default     = {}
}

variable "python" {
  type        = string
  description = "Python 3.11+ interpreter that builds the function archives at plan time."
  default     = "python3"
}

# Two regions (terraform/README.md, "Two regions"); unset: one region.

variable "secondary_region" {
  type        = string
  description = "A second region (functions, load balancer, Redis Cluster secondary, Cloud SQL replica, secrets replicated); needs use_redis_cluster = true. null: one region."
  default     = null
}

variable "serving_region" {
  type        = string
  description = "The region that serves (two regions): region (null) or secondary_region after a failover (docs/operations.md)."
  default     = null
}

variable "sql_replica_promoted" {
  type        = bool
  description = "Promote the Cloud SQL cross-region replica: the apply that sets it promotes it (never by hand first: docs/operations.md, \"Fail over\"); keep it true afterwards."
  default     = false
}

variable "lb_domains" {
  type        = list(string)
  description = "DNS names of the load balancer (two regions), for its Google-managed certificate."
  default     = []
}

variable "lb_ssl_certificates" {
  type        = list(string)
  description = "Ids of existing SSL certificates for the load balancer (two regions)."
  default     = []
}
