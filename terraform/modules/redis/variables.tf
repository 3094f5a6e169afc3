variable "project_id" {
  type        = string
  description = "Google Cloud project that owns the Redis instance or cluster."
}

variable "region" {
  type        = string
  description = "Region of the Redis instance or cluster (same as the functions)."
}

variable "name" {
  type        = string
  description = "Name of the Memorystore instance or cluster, e.g. \"seatlease-dev\"."
}

variable "network_id" {
  type        = string
  description = "Id of the VPC network the functions reach Redis through."
}

variable "private_services_range_name" {
  type        = string
  description = "Name of the private services access range the instance takes its address from (Memorystore for Redis, PRIVATE_SERVICE_ACCESS mode)."
}

variable "private_services_connection" {
  type        = string
  description = "Id of the google_service_networking_connection; the instance is created only after it exists (explicit dependency)."
}

variable "psc_subnet_id" {
  type        = string
  description = "Subnet for the Private Service Connect endpoints of Memorystore for Redis Cluster (used only when use_cluster is true)."
}

variable "use_cluster" {
  type        = bool
  description = "false: Memorystore for Redis (google_redis_instance). true: Memorystore for Redis Cluster (google_redis_cluster + its service connection policy); the functions then get REDIS_CLUSTER=1."
  default     = false
}

variable "tier" {
  type        = string
  description = "Memorystore for Redis tier: STANDARD_HA (replicated, automatic failover; use in prod) or BASIC (single node, dev only)."
  default     = "STANDARD_HA"

  validation {
    condition     = contains(["BASIC", "STANDARD_HA"], var.tier)
    error_message = "tier must be BASIC or STANDARD_HA."
  }
}

variable "memory_size_gb" {
  type        = number
  description = "Memory of the Memorystore for Redis instance in GiB."
  default     = 1
}

variable "redis_version" {
  type        = string
  description = "Redis version of the Memorystore for Redis instance (a REDIS_7_x value)."
  default     = "REDIS_7_2"

  validation {
    condition     = startswith(var.redis_version, "REDIS_7_")
    error_message = "redis_version must be a Redis 7 version (REDIS_7_0, REDIS_7_2, ...)."
  }
}

variable "persistence_enabled" {
  type        = bool
  description = "Persist the leases so that a node restart does not drop every live lease: hourly RDB snapshots on Memorystore for Redis, AOF (fsync every second) on a Redis Cluster (DISABLED when false)."
  default     = false
}

variable "maintenance_day" {
  type        = string
  description = "Day of the weekly maintenance window (MONDAY ... SUNDAY)."
  default     = "SUNDAY"
}

variable "maintenance_hour" {
  type        = number
  description = "UTC hour (0-23) at which the weekly maintenance window starts."
  default     = 3

  validation {
    condition     = var.maintenance_hour >= 0 && var.maintenance_hour <= 23
    error_message = "maintenance_hour must be between 0 and 23."
  }
}

variable "cluster_shard_count" {
  type        = number
  description = "Number of shards of the Redis Cluster (use_cluster = true)."
  default     = 3
}

variable "cluster_replica_count" {
  type        = number
  description = "Replicas per shard of the Redis Cluster (use_cluster = true)."
  default     = 1
}

variable "cluster_node_type" {
  type        = string
  description = "Node type of the Redis Cluster (use_cluster = true). REDIS_SHARED_CORE_NANO (default) is for dev and tests: shared cores, 1.4 GB; production uses REDIS_STANDARD_SMALL or larger (envs/prod)."
  default     = "REDIS_SHARED_CORE_NANO"

  validation {
    condition     = contains(["REDIS_SHARED_CORE_NANO", "REDIS_STANDARD_SMALL", "REDIS_HIGHMEM_MEDIUM", "REDIS_HIGHMEM_XLARGE"], var.cluster_node_type)
    error_message = "cluster_node_type must be REDIS_SHARED_CORE_NANO, REDIS_STANDARD_SMALL, REDIS_HIGHMEM_MEDIUM or REDIS_HIGHMEM_XLARGE."
  }
}

variable "iam_auth" {
  type        = bool
  description = "Redis Cluster only: require IAM authentication (AUTH with an OAuth access token of a principal holding roles/redis.dbConnectionUser). Chosen at creation: changing it replaces the cluster."
  default     = false

  validation {
    condition     = !var.iam_auth || var.use_cluster
    error_message = "iam_auth needs use_cluster (Memorystore for Redis uses its AUTH string)."
  }
}

variable "deletion_protection" {
  type        = bool
  description = "Refuse to destroy the instance/cluster (set false for throw-away stacks)."
  default     = true
}

variable "labels" {
  type        = map(string)
  description = "Labels set on the instance or cluster."
  default     = {}
}

variable "primary_cluster_id" {
  type        = string
  description = "Id (projects/P/locations/R/clusters/N) of the Memorystore for Redis Cluster this cluster replicates from (cross-region replication, cluster_role SECONDARY: read-only until `gcloud redis clusters switchover`). null (default): a primary or standalone cluster, or an instance. Needs use_cluster."
  default     = null

  validation {
    condition     = var.primary_cluster_id == null || (var.use_cluster && can(regex("^projects/[^/]+/locations/[^/]+/clusters/[^/]+$", var.primary_cluster_id)))
    error_message = "primary_cluster_id needs use_cluster = true (only Memorystore for Redis Cluster replicates across regions) and is a cluster id projects/P/locations/R/clusters/N."
  }
}
