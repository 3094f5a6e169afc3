output "acquire_url" {
  description = "URL clients POST to to acquire a seat (with two regions the load balancer's /acquire: the first region's public functions admit the load balancer only)."
  value       = module.seatlease.acquire_url
}

output "heartbeat_url" {
  description = "URL clients POST heartbeats to (with two regions the load balancer's /heartbeat)."
  value       = module.seatlease.heartbeat_url
}

output "release_url" {
  description = "URL clients POST to to release a seat (with two regions the load balancer's /release)."
  value       = module.seatlease.release_url
}

output "admin_url" {
  description = "URL of the IAM-protected admin function (call with an identity token of an admin_invokers member)."
  value       = module.seatlease.admin_url
}

output "function_urls" {
  description = "Every function URL by name: the URL to call it at (with two regions the load balancer's for the functions behind it, the first region's for the others)."
  value       = module.seatlease.function_urls
}

output "cloud_sql_instance" {
  description = "Cloud SQL connection name, for the Cloud SQL Auth Proxy."
  value       = module.seatlease.cloud_sql_instance
}

output "db_name" {
  description = "Application database name."
  value       = module.seatlease.db_name
}

output "db_user" {
  description = "Built-in database user."
  value       = module.seatlease.db_user
}

output "db_password_secret" {
  description = "Secret Manager secret holding the database password."
  value       = module.seatlease.db_password_secret
}

output "redis_host" {
  description = "Redis host (private)."
  value       = module.seatlease.redis_host
}

output "dead_letter_subscription" {
  description = "Subscription holding dead-lettered lease events."
  value       = module.seatlease.dead_letter_subscription
}

output "jwks_url" {
  description = "URL of the JWKS (GET): the public keys that verify the lease tokens (with two regions the load balancer's /keys: the keys function admits the load balancer only)."
  value       = module.seatlease.jwks_url
}

output "signing_key_secret" {
  description = "Secret Manager secret of the lease-token signing keys, for `seatlease keys rotate --secret` (add the first key right after the first apply)."
  value       = module.seatlease.signing_key_secret
}

output "load_balancer_ip" {
  description = "Two regions: the load balancer's IPv4 address (the A record of every name in lb_domains); null with one region."
  value       = module.seatlease.load_balancer_ip
}

output "load_balancer_urls" {
  description = "Two regions: the URL clients use for each function behind the load balancer (acquire, heartbeat, release, keys, portal); null with one region."
  value       = module.seatlease.load_balancer_urls
}

output "redis_endpoints" {
  description = "Redis endpoint (HOST:PORT, private) of each region's Redis, by region: the first region's, and with two regions the second's (for `seatlease failover begin`)."
  value       = module.seatlease.redis_endpoints
}

output "sql_replica_connection_name" {
  description = "Two regions: connection name of the Cloud SQL cross-region replica (sql_replica_promoted promotes it); null with one region."
  value       = module.seatlease.sql_replica_connection_name
}

output "secondary_function_urls" {
  description = "Two regions: every function URL of the second region by name (admin for the operators; the public ones answer through the load balancer only); empty with one region."
  value       = module.seatlease.secondary_function_urls
}
