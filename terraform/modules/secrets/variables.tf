variable "project_id" {
  type        = string
  description = "Google Cloud project that owns the secrets."
}

variable "name" {
  type        = string
  description = "Prefix of the secret names, e.g. \"seatlease-dev\" gives seatlease-dev-redis-auth and seatlease-dev-db-password."
}

variable "replica_locations" {
  type        = list(string)
  description = "Regions that hold the secret payloads (user-managed replication keeps them in your regions): the stack's region, and its second region in a two-region stack. Fixed when a secret is created; a plan that adds a location to secrets that exist fails (main.tf)."

  validation {
    condition     = length(var.replica_locations) >= 1 && length(distinct(var.replica_locations)) == length(var.replica_locations)
    error_message = "replica_locations lists one or more distinct regions."
  }
}

variable "redis_auth_enabled" {
  type        = bool
  description = "Whether Redis has an AUTH string to store (false for Memorystore for Redis Cluster, which has none)."
}

variable "redis_auth_string" {
  type        = string
  description = "The AUTH string Memorystore generated. Written to Secret Manager as a write-only value; a new version is written automatically whenever it changes (after an AUTH rotation)."
  sensitive   = true
}

variable "db_password_version" {
  type        = number
  description = "Version of the generated database password. Bump it (here and in the database module, modules/stack passes one variable to both) to generate, store and apply a new password."
  default     = 1
}

variable "labels" {
  type        = map(string)
  description = "Labels set on the secrets."
  default     = {}
}
