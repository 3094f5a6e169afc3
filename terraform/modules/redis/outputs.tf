output "host" {
  description = "Address the functions connect to (instance host, or cluster discovery endpoint)."
  value       = local.host
}

output "port" {
  description = "Port of Redis (6378 on an instance with in-transit encryption)."
  value       = local.port
}

output "redis_url" {
  description = "REDIS_URL for the functions: rediss:// (TLS), without credentials (the AUTH string comes from Secret Manager as REDIS_PASSWORD)."
  value       = "rediss://${local.host}:${local.port}/0"
}

output "ca_cert" {
  description = "PEM of every CA that may sign the server certificate (all of server_ca_certs, so that a CA rotation needs no redeploy); REDIS_CA_CERT for the functions."
  value       = local.ca_cert
}

output "auth_string" {
  description = "The AUTH string Memorystore generated (empty for Redis Cluster, which has none). It is an attribute of google_redis_instance, so it is in the Terraform state in clear text."
  value       = var.use_cluster ? "" : google_redis_instance.this[0].auth_string
  sensitive   = true
}

output "auth_enabled" {
  description = "Whether clients must send an AUTH string (true for Memorystore for Redis, false for Redis Cluster)."
  value       = !var.use_cluster
}

output "is_cluster" {
  description = "True when Memorystore for Redis Cluster is used (the functions get REDIS_CLUSTER=1)."
  value       = var.use_cluster
}

output "instance_id" {
  description = "Id of the Redis instance or cluster, used by monitoring filters."
  value       = var.use_cluster ? google_redis_cluster.this[0].id : google_redis_instance.this[0].id
}

output "instance_name" {
  description = "Name of the Redis instance or cluster."
  value       = var.name
}
