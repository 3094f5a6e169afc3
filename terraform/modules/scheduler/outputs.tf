output "job_name" {
  description = "Name of the Cloud Scheduler job that triggers the reaper."
  value       = google_cloud_scheduler_job.reaper.name
}

output "service_account_email" {
  description = "Service account the scheduler invokes the reaper as."
  value       = var.service_account_email
}

output "webhooks_retry_job_name" {
  description = "Name of the Cloud Scheduler job that triggers webhooks-retry (webhook retries and license alerts)."
  value       = google_cloud_scheduler_job.webhooks_retry.name
}
