variable "project_id" {
  type        = string
  description = "Google Cloud project that runs the functions."
}

variable "region" {
  type        = string
  description = "Region of the functions (same as Redis and Cloud SQL)."
}

variable "name" {
  type        = string
  description = "Prefix of service accounts and the source bucket, e.g. \"seatlease-dev\" (at most 14 characters: service account ids are limited to 30)."

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{2,13}$", var.name))
    error_message = "name must be 3-14 characters of a-z, 0-9 and -, starting with a letter."
  }
}

variable "repo_root" {
  type        = string
  description = "Path of the repository checkout (holds functions/, shared/seatlease/, requirements-functions.txt and tools/build_function_source.py)."
}

variable "build_dir" {
  type        = string
  description = "Directory where the source archives are written before upload, relative to the root module (e.g. \"./.build\"): the archives' paths are stored with their objects, and an absolute path would differ between checkouts and replace every object."

  validation {
    condition     = !startswith(var.build_dir, "/") && !can(regex("^[A-Za-z]:", var.build_dir))
    error_message = "build_dir must be relative to the root module (an absolute path replaces every source object when applied from another checkout)."
  }
}

variable "python" {
  type        = string
  description = "Python interpreter (3.11+) that runs tools/build_function_source.py at plan time."
  default     = "python3"
}

variable "network_id" {
  type        = string
  description = "VPC network used for Direct VPC egress."
}

variable "subnet_id" {
  type        = string
  description = "Subnet used for Direct VPC egress (Cloud Run takes about two addresses per instance, in /28 blocks per function: the network module sizes it from max_instance_counts)."
}

variable "redis_url" {
  type        = string
  description = "REDIS_URL (rediss://HOST:PORT/0)."
}

variable "redis_ca_cert" {
  type        = string
  description = "PEM of the Redis server CA (REDIS_CA_CERT)."
}

variable "redis_cluster" {
  type        = bool
  description = "true when Redis is a Memorystore for Redis Cluster (sets REDIS_CLUSTER=1)."
  default     = false
}

variable "redis_iam_auth" {
  type        = bool
  description = "The Redis Cluster requires IAM authentication: the functions that use Redis get REDIS_IAM_AUTH=1 and roles/redis.dbConnectionUser."
  default     = false
}

variable "redis_password_secret_id" {
  type        = string
  description = "Short name of the Secret Manager secret with the Redis AUTH string (REDIS_PASSWORD); empty when Redis has no AUTH."
}

variable "cloud_sql_instance" {
  type        = string
  description = "Cloud SQL instance connection name PROJECT:REGION:INSTANCE (CLOUD_SQL_INSTANCE)."
}

variable "sql_instance_name" {
  type        = string
  description = "Name of the Cloud SQL instance (for the scoped cloudsql.client grant and IAM database users)."
}

variable "db_name" {
  type        = string
  description = "Database name (DB_NAME)."
}

variable "db_user" {
  type        = string
  description = "Built-in database user (DB_USER) when db_iam_auth is false."
}

variable "db_password_secret_id" {
  type        = string
  description = "Short name of the Secret Manager secret with the database password (DB_PASSWORD)."
}

variable "sql_max_connections" {
  type        = number
  description = "max_connections of the Cloud SQL instance (the database module's max_connections output): with sql_reserved_connections, the budget the functions' pools must fit (sql_pool.tf). null (an unknown tier) fails the plan."
}

variable "sql_reserved_connections" {
  type        = number
  description = "Connections of sql_max_connections the functions leave free: PostgreSQL's 3 superuser-reserved slots, Cloud SQL's own maintenance connections and the operators' sessions through the Auth Proxy (seatlease db upgrade, reports)."
  default     = 10
}

variable "db_iam_auth" {
  type        = bool
  description = "Connect with IAM database authentication (DB_IAM_AUTH=1, one IAM database user per function service account) instead of the password. The IAM users then need GRANTs on the schema, see terraform/README.md."
  default     = false
}

variable "signing_key_secret_id" {
  type        = string
  description = "Short name of the Secret Manager secret holding the lease-token signing keys (one version per Ed25519 key, written by `seatlease keys rotate`, never by Terraform). acquire/heartbeat/release may read it; the keys function may read its metadata only."
}

variable "pubsub_topic_name" {
  type        = string
  description = "Short name of the lease event topic (PUBSUB_TOPIC); the reaper may publish to it."
}

variable "pubsub_service_agent_email" {
  type        = string
  description = "Pub/Sub service agent; it may mint OIDC tokens for the audit push service account."
}

variable "log_level" {
  type        = string
  description = "LOG_LEVEL of every function: DEBUG or INFO. Not WARNING or ERROR: the request lines and the reaper's \"reaper run\" line are INFO, and the log-based metrics count them (the 5xx ratio's denominator, the \"no successful reaper run\" alert)."
  default     = "INFO"

  validation {
    condition     = contains(["DEBUG", "INFO"], var.log_level)
    error_message = "log_level must be DEBUG or INFO: above INFO the request lines and the reaper's run line, which the monitoring's log-based metrics count, are not written (the \"no successful reaper run\" alert would fire forever and the 5xx ratio lose its denominator)."
  }
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
  description = "Per-function overrides (keys: acquire, heartbeat, release, keys, reaper, audit, admin, portal) of min_instances, max_instances, concurrency (max_instance_request_concurrency), cpu, memory and timeout_seconds. Unset fields keep the defaults in main.tf (local.defaults)."
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.function_settings) : contains(["acquire", "heartbeat", "release", "keys", "reaper", "audit", "admin", "portal"], k)])
    error_message = "function_settings keys must be function names: acquire, heartbeat, release, keys, reaper, audit, admin, portal."
  }
}

variable "admin_invokers" {
  type        = list(string)
  description = "IAM members (e.g. \"group:seatlease-ops@example.com\", \"serviceAccount:...\") allowed to call the admin function. Nobody else can."
  default     = []

  validation {
    condition     = alltrue([for m in var.admin_invokers : can(regex("^(user|group|serviceAccount|domain|principal|principalSet):", m))]) && !contains(var.admin_invokers, "allUsers") && !contains(var.admin_invokers, "allAuthenticatedUsers")
    error_message = "admin_invokers must be IAM members such as group:ops@example.com; allUsers/allAuthenticatedUsers are refused."
  }
}

variable "labels" {
  type        = map(string)
  description = "Labels set on the functions and the source bucket."
  default     = {}
}

variable "secret_versions" {
  type        = string
  description = "Current Secret Manager version numbers (secrets module output), exposed as SECRET_VERSIONS: when a credential is rolled, the changed value starts new revisions, which resolve the \"latest\" secrets again."
  default     = ""
}

variable "source_bucket_force_destroy" {
  type        = bool
  description = "Let `terraform destroy` delete the source bucket with the archives in it (true for throw-away stacks; modules/stack passes !deletion_protection)."
  default     = false
}

variable "source_bucket_location" {
  type        = string
  description = "Location of the source bucket: a multi-region (EU, US, ASIA) or a dual-region (e.g. EUR4). null: the multi-region of region's continent (US where there is none). Never a single region: the second region's builds read it when the first is lost."
  default     = null

  validation {
    condition     = var.source_bucket_location == null || !can(regex("^[a-z]+-[a-z]+[0-9]+$", lower(coalesce(var.source_bucket_location, "x"))))
    error_message = "source_bucket_location must be a multi-region or a dual-region, not a single region such as europe-west1."
  }
}

variable "source_noncurrent_days" {
  type        = number
  description = "Days a replaced source archive (a noncurrent object version in the source bucket) is kept before it is deleted. Live archives are never aged out."
  default     = 30
}

variable "secondary_region" {
  type        = string
  description = "Second region of a two-region stack: every function is deployed there too (same identities, grants and source objects), with secondary_subnet_id, secondary_redis_url and secondary_redis_ca_cert. null (default): one region."
  default     = null

  validation {
    condition     = var.secondary_region == null || (var.secondary_region != var.region && var.secondary_subnet_id != null && var.secondary_redis_url != null && var.secondary_redis_ca_cert != null && var.sql_replica_instance_name != null)
    error_message = "secondary_region (other than region) needs secondary_subnet_id, secondary_redis_url, secondary_redis_ca_cert and sql_replica_instance_name."
  }
}

variable "secondary_subnet_id" {
  type        = string
  description = "Direct VPC egress subnet of the second region's functions (the network module's secondary_functions_subnet_id)."
  default     = null
}

variable "secondary_redis_url" {
  type        = string
  description = "REDIS_URL of the second region's functions: their own region's Redis Cluster (rediss://HOST:PORT/0)."
  default     = null
}

variable "secondary_redis_ca_cert" {
  type        = string
  description = "REDIS_CA_CERT of the second region's functions: the CAs of their own region's Redis Cluster."
  default     = null
}

variable "sql_replica_instance_name" {
  type        = string
  description = "Name of the Cloud SQL cross-region replica (two regions): every function that uses the database gets the same cloudsql.client grant on it, which it uses once the replica is promoted."
  default     = null
}

variable "webhook_key_secret_id" {
  type        = string
  description = "Short name of the Secret Manager secret holding WEBHOOK_KEY (base64 of 32 bytes: the AES-256-GCM key of the webhook endpoints' secrets), read by admin, portal, webhooks and webhooks-retry (the secrets module's webhook_key_secret_id)."
}

variable "webhook_retry_first_seconds" {
  type        = number
  description = "WEBHOOK_RETRY_FIRST_SECONDS: the first step of a failed webhook delivery's retry schedule (exponential backoff with jitter from there, for up to 3 days). The local stack uses 1."
  default     = 30

  validation {
    condition     = var.webhook_retry_first_seconds >= 1 && var.webhook_retry_first_seconds <= 3600
    error_message = "webhook_retry_first_seconds is 1 to 3600 seconds."
  }
}
