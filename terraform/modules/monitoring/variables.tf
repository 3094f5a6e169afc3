variable "project_id" {
  type        = string
  description = "Google Cloud project monitored."
}

variable "name" {
  type        = string
  description = "Prefix used in alert and dashboard names, e.g. \"seatlease-dev\"."
}

variable "notification_channels" {
  type        = list(string)
  description = "Ids of existing notification channels (projects/P/notificationChannels/N) every alert notifies."
  default     = []
}

variable "client_functions" {
  type        = list(string)
  description = "Cloud Run service names of the client-facing functions."
  default     = ["acquire", "heartbeat", "release"]
}

variable "reaper_service_name" {
  type        = string
  description = "Cloud Run service name of the reaper function."
  default     = "reaper"
}

variable "audit_service_name" {
  type        = string
  description = "Cloud Run service name of the audit function (its \"license notice\" lines raise the license-expiring alert)."
  default     = "audit"
}

variable "dead_letter_subscription_name" {
  type        = string
  description = "Subscription on the dead-letter topic; any message in it raises an alert."
}

variable "webhooks_subscription_name" {
  type        = string
  description = "Push subscription of the webhooks function; its oldest unacknowledged message raises an alert after webhooks_backlog_seconds."
  default     = "seat-events-webhooks"
}

variable "webhooks_dead_letter_subscription_name" {
  type        = string
  description = "Subscription on the webhooks' dead-letter topic; any message in it raises an alert."
  default     = "seat-events-webhooks-dead-letter-hold"
}

variable "webhooks_backlog_seconds" {
  type        = number
  description = "Age in seconds of the oldest lease event the webhooks function has not stored yet that raises the webhook backlog alert."
  default     = 900
}

variable "redis_is_cluster" {
  type        = bool
  description = "Whether Redis is a Memorystore for Redis Cluster (selects the memory metric)."
  default     = false
}

variable "redis_instance_id" {
  type        = string
  description = "Id of the Redis instance (projects/P/locations/R/instances/N) or cluster."
}

variable "reaper_stalled_after" {
  type        = string
  description = "Alert when no successful reaper run was logged for this long."
  default     = "300s"
}

variable "reclaimed_per_minute_threshold" {
  type        = number
  description = "Seats reclaimed by one reaper run (runs are one minute apart) above which a crash wave is reported."
  default     = 100
}

variable "denials_per_minute_threshold" {
  type        = number
  description = "Acquire denials (409 no_seats_available) per minute, over 5 minutes, above which an alert fires."
  default     = 60
}

variable "error_ratio_threshold" {
  type        = number
  description = "Fraction of client requests answered 5xx, over 5 minutes, above which an alert fires."
  default     = 0.02
}

variable "outbox_backlog_threshold" {
  type        = number
  description = "Events waiting in the Redis outboxes after a reaper run, sustained 10 minutes, above which an alert fires."
  default     = 10000
}

variable "redis_memory_ratio_threshold" {
  type        = number
  description = "Redis memory usage ratio above which an alert fires, held 1 minute (noeviction: writes fail at 100%; docs/operations.md sizes memory_size_gb for at most 50% in normal use)."
  default     = 0.7
}

variable "log_metric_visibility_wait" {
  type        = string
  description = "How long to wait after creating or renaming log-based metrics before creating the alert policies and the dashboard that use them (Cloud Monitoring can take up to 10 minutes to know a new log-based metric)."
  default     = "10m"

  validation {
    condition     = can(regex("^[0-9]+[smh]$", var.log_metric_visibility_wait))
    error_message = "log_metric_visibility_wait is a duration such as 600s, 10m or 1h."
  }
}
