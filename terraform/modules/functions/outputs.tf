output "urls" {
  description = "HTTPS URL of every function (Cloud Functions URL), by function name."
  value       = { for fn, f in google_cloudfunctions2_function.this : fn => f.url }
}

# The services' names and URIs come from the function table and the region (run_services
# in main.tf), not from the function resources: the load balancer, the scheduler and the
# push subscription take them, and a failover's targeted apply of those must not pull
# in the functions of the region that was lost (docs/operations.md, "Fail over"). The
# run.invoker grants that need the service to exist are made here, on the resources.
output "service_uris" {
  description = "URI of the Cloud Run service behind every function, by function name: its deterministic URL https://NAME-PROJECT_NUMBER.REGION.run.app."
  value       = local.run_services[var.region]
}

output "service_names" {
  description = "Name of the Cloud Run service behind every function (serverless NEGs, metrics): the function's name, known before the service exists (an IAM grant on it must name the function resource instead)."
  value       = { for fn in keys(local.functions) : fn => fn }
}

output "service_account_emails" {
  description = "Runtime service account of every function."
  value       = { for fn, sa in google_service_account.function : fn => sa.email }
}

output "scheduler_service_account_email" {
  description = "Service account Cloud Scheduler invokes the reaper and webhooks-retry as (run.invoker on those two in each region)."
  value       = google_service_account.scheduler.email
}

output "audit_push_service_account_email" {
  description = "Service account the audit push subscription authenticates as."
  value       = google_service_account.audit_push.email
}

output "webhooks_push_service_account_email" {
  description = "Service account the webhooks push subscription authenticates as (run.invoker on the webhooks function only)."
  value       = google_service_account.webhooks_push.email
}

output "webhook_sender_tag" {
  description = "Network tag of the functions that call webhook receivers (webhooks, webhooks-retry); the network module's firewall keeps them off the VPC's private ranges except Cloud SQL."
  value       = "seatlease-webhook-senders"
}

output "environment" {
  description = "Plain environment variables of every function (the secrets are listed in secret_environment)."
  value       = local.environment
}

output "secret_environment" {
  description = "Secret environment variables of every function: variable name => Secret Manager secret short name."
  value       = local.secrets
}

output "jwks_url" {
  description = "URL of the JWKS (the keys function): the public keys that verify the lease tokens."
  value       = google_cloudfunctions2_function.this["keys"].url
}

output "issuer" {
  description = "The lease tokens' iss claim: the functions' base URL."
  value       = local.issuer
}

output "max_instance_counts" {
  description = "max_instance_count of every function by name (defaults merged with function_settings): what the Direct VPC egress subnet is sized for."
  value       = { for fn, s in local.settings : fn => s.max_instances }
}

output "sql_connections" {
  description = "Cloud SQL connections each function that uses the database may hold at its maximum instance count (max_instances x DB_POOL_SIZE), by name; sql_pool.tf fails the plan when their sum exceeds sql_max_connections less sql_reserved_connections."
  value       = local.sql_connections
}

output "secondary_urls" {
  description = "HTTPS URL of every function of the second region, by function name (empty without secondary_region). Its public functions answer only through the load balancer."
  value       = { for fn, f in google_cloudfunctions2_function.secondary : fn => f.url }
}

output "secondary_service_uris" {
  description = "URI of the Cloud Run service behind every function of the second region, by function name (its deterministic run.app URL; empty without secondary_region)."
  value       = var.secondary_region == null ? {} : local.run_services[var.secondary_region]
}

output "secondary_service_names" {
  description = "Name of the Cloud Run service behind every function of the second region (serverless NEGs): the function's name; empty without secondary_region."
  value       = { for fn in keys(local.secondary_functions) : fn => fn }
}
