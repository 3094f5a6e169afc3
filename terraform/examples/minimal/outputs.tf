output "acquire_url" {
  description = "URL clients POST to to acquire a seat."
  value       = module.seatlease.acquire_url
}

output "function_urls" {
  description = "Every function URL by name."
  value       = module.seatlease.function_urls
}

output "cloud_sql_instance" {
  description = "Cloud SQL connection name, for the Cloud SQL Auth Proxy."
  value       = module.seatlease.cloud_sql_instance
}
