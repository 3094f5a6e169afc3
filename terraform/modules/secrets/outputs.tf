output "redis_password_secret_id" {
  description = "Short name of the secret holding the Redis AUTH string (empty when Redis has no AUTH)."
  value       = var.redis_auth_enabled ? google_secret_manager_secret.redis_auth[0].secret_id : ""
}

output "db_password_secret_id" {
  description = "Short name of the secret holding the database password."
  value       = google_secret_manager_secret.db_password.secret_id
}

output "db_password" {
  description = "The database password as stored in Secret Manager, for the database module's write-only user password. Ephemeral: never written to state."
  value       = ephemeral.google_secret_manager_secret_version.db_password.secret_data
  sensitive   = true
  ephemeral   = true
}

output "secret_versions" {
  description = "Secret Manager version numbers currently written (e.g. \"redis-auth:2,db-password:3\"). The functions get it as SECRET_VERSIONS so that writing a new version rolls out new revisions, which read \"latest\" at startup."
  value = join(",", compact([
    var.redis_auth_enabled ? "redis-auth:${google_secret_manager_secret_version.redis_auth[0].version}" : "",
    "db-password:${google_secret_manager_secret_version.db_password.version}",
    "webhook-key:${google_secret_manager_secret_version.webhook_key.version}",
  ]))
}

output "signing_key_secret_id" {
  description = "Short name of the secret holding the lease-token signing keys (no version until `seatlease keys rotate --secret projects/PROJECT/secrets/NAME --activate-in 0`)."
  value       = google_secret_manager_secret.signing_key.secret_id
}

output "webhook_key_secret_id" {
  description = "Short name of the secret holding WEBHOOK_KEY, the AES-256-GCM key of the webhook endpoints' secrets (admin, portal, webhooks and webhooks-retry read it)."
  value       = google_secret_manager_secret.webhook_key.secret_id
}
