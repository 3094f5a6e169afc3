# The URLs clients call. With two regions the public functions of both regions admit
# only the load balancer (ALLOW_INTERNAL_AND_GCLB), so the functions behind it are
# called at its URLs; the others (admin, reaper, audit) keep their own.
locals {
  client_urls = merge(module.functions.urls, local.two_regions ? module.loadbalancer[0].urls : {})
}

output "acquire_url" {
  description = "URL clients POST to to acquire a seat (with two regions the load balancer's /acquire: the first region's public functions admit the load balancer only)."
  value       = local.client_urls["acquire"]
}

output "heartbeat_url" {
  description = "URL clients POST heartbeats to (with two regions the load balancer's /heartbeat)."
  value       = local.client_urls["heartbeat"]
}

output "release_url" {
  description = "URL clients POST to to release a seat (with two regions the load balancer's /release)."
  value       = local.client_urls["release"]
}

output "admin_url" {
  description = "URL of the IAM-protected admin function (call with an identity token of an admin_invokers member)."
  value       = module.functions.urls["admin"]
}

output "function_urls" {
  description = "Every function URL by name: the URL to call it at (with two regions the load balancer's for the functions behind it, the first region's for the others)."
  value       = local.client_urls
}

output "cloud_sql_instance" {
  description = "Cloud SQL connection name, for the Cloud SQL Auth Proxy."
  value       = var.sql_replica_promoted ? module.database.replica_connection_name : module.database.connection_name
}

output "db_name" {
  description = "Application database name."
  value       = module.database.db_name
}

output "db_user" {
  description = "Built-in database user."
  value       = module.database.db_user
}

output "db_password_secret" {
  description = "Secret Manager secret holding the database password."
  value       = module.secrets.db_password_secret_id
}

output "redis_host" {
  description = "Redis host (private)."
  value       = module.redis.host
}

output "dead_letter_subscription" {
  description = "Subscription holding dead-lettered lease events."
  value       = module.pubsub.dead_letter_subscription_name
}

output "jwks_url" {
  description = "URL of the JWKS (GET): the public keys that verify the lease tokens (with two regions the load balancer's /keys: the keys function admits the load balancer only)."
  value       = local.two_regions ? module.loadbalancer[0].urls["keys"] : module.functions.jwks_url
}

output "signing_key_secret" {
  description = "Secret Manager secret of the lease-token signing keys, for `seatlease keys rotate --secret` (add the first key right after the first apply)."
  value       = "projects/${var.project_id}/secrets/${module.secrets.signing_key_secret_id}"
}

output "load_balancer_ip" {
  description = "Two regions: the load balancer's IPv4 address (the A record of every name in lb_domains); null with one region."
  value       = local.two_regions ? module.loadbalancer[0].ip_address : null
}

output "load_balancer_urls" {
  description = "Two regions: the URL clients use for each function behind the load balancer (acquire, heartbeat, release, keys, portal); null with one region."
  value       = local.two_regions ? module.loadbalancer[0].urls : null
}

output "redis_endpoints" {
  description = "Redis endpoint (HOST:PORT, private) of each region's Redis, by region: the first region's, and with two regions the second's (for `seatlease failover begin`)."
  value = merge(
    { (var.region) = "${module.redis.host}:${module.redis.port}" },
    local.two_regions ? { (var.secondary_region) = "${module.redis_secondary[0].host}:${module.redis_secondary[0].port}" } : {},
  )
}

output "sql_replica_connection_name" {
  description = "Two regions: connection name of the Cloud SQL cross-region replica (sql_replica_promoted promotes it); null with one region."
  value       = module.database.replica_connection_name
}

output "secondary_function_urls" {
  description = "Two regions: every function URL of the second region by name (admin for the operators; the public ones answer through the load balancer only); empty with one region."
  value       = module.functions.secondary_urls
}
