output "connection_name" {
  description = "Instance connection name PROJECT:REGION:INSTANCE (CLOUD_SQL_INSTANCE for the functions, argument of the Cloud SQL Auth Proxy)."
  value       = google_sql_database_instance.this.connection_name
}

output "instance_name" {
  description = "Name of the Cloud SQL instance."
  value       = google_sql_database_instance.this.name
}

output "private_ip_address" {
  description = "Private IP address of the instance."
  value       = google_sql_database_instance.this.private_ip_address
}

output "db_name" {
  description = "Name of the application database (DB_NAME)."
  value       = google_sql_database.app.name
}

output "db_user" {
  description = "Name of the built-in database user (DB_USER when password auth is used)."
  value       = google_sql_user.app.name
}

output "max_connections" {
  description = "max_connections of the instance: var.max_connections, else Cloud SQL's default for the tier (connections.tf); null for a tier whose default is not known here."
  value       = local.max_connections
}

output "replica_connection_name" {
  description = "Connection name PROJECT:REGION:INSTANCE of the cross-region replica (null without replica_region)."
  value       = var.replica_region == null ? null : google_sql_database_instance.replica[0].connection_name
}

output "replica_instance_name" {
  description = "Name of the cross-region replica (null without replica_region)."
  value       = var.replica_region == null ? null : google_sql_database_instance.replica[0].name
}
