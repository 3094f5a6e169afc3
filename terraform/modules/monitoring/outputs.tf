output "alert_policy_ids" {
  description = "Alert policy ids by purpose."
  value = merge(
    {
      reaper           = google_monitoring_alert_policy.reaper.id
      client_5xx       = google_monitoring_alert_policy.client_5xx.id
      license_expiring = google_monitoring_alert_policy.license_expiring.id
    },
    { for k, p in google_monitoring_alert_policy.threshold : k => p.id },
  )
}

output "dashboard_id" {
  description = "Id of the seats dashboard."
  value       = google_monitoring_dashboard.seatlease.id
}

output "log_metric_names" {
  description = "Names of the log-based metrics (logging.googleapis.com/user/NAME)."
  value = concat(
    [
      google_logging_metric.client_requests.name,
      google_logging_metric.client_5xx.name,
      google_logging_metric.denials.name,
      google_logging_metric.client_latency.name,
      google_logging_metric.seats_used.name,
      google_logging_metric.reaper_runs.name,
      google_logging_metric.reaper_errors.name,
    ],
    [for m in google_logging_metric.reaper_value : m.name],
  )
}
