variable "project_id" {
  type        = string
  description = "Google Cloud project of the scheduler job."
}

variable "region" {
  type        = string
  description = "Region of the scheduler job and of the reaper function."
}

variable "name" {
  type        = string
  description = "Prefix of the job and service account names, e.g. \"seatlease-dev\" (at most 14 characters)."
}

variable "service_account_email" {
  type        = string
  description = "Service account the job invokes the reaper as (its OIDC token); modules/functions creates it and grants it roles/run.invoker on the reaper of each region."
}

variable "reaper_uri" {
  type        = string
  description = "HTTPS URI of the reaper function's service; used as the target and as the OIDC audience."
}

variable "webhooks_retry_uri" {
  type        = string
  description = "HTTPS URI of the webhooks-retry function's service (webhook retries and license alerts); used as the target and as the OIDC audience."
}

variable "webhooks_retry_schedule" {
  type        = string
  description = "Cron schedule of webhooks-retry (the retries' resolution and how often the alerts are computed)."
  default     = "* * * * *"
}

variable "schedule" {
  type        = string
  description = "Cron schedule of the reaper."
  default     = "* * * * *"
}

variable "time_zone" {
  type        = string
  description = "Time zone of the schedule."
  default     = "Etc/UTC"
}

variable "attempt_deadline" {
  type        = string
  description = "How long the scheduler waits for the reaper to answer."
  default     = "120s"
}

variable "paused" {
  type        = bool
  description = "Create the job paused (e.g. before the first deploy of the code)."
  default     = false
}
