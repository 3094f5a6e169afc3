variable "project_id" {
  type        = string
  description = "Google Cloud project that owns the topics and subscriptions."
}

variable "topic_name" {
  type        = string
  description = "Name of the lease event topic the reaper publishes to (PUBSUB_TOPIC)."
  default     = "seat-events"
}

variable "message_retention_duration" {
  type        = string
  description = "How long the topics and subscriptions keep messages (max 31 days on topics, 7 days on subscriptions)."
  default     = "604800s"
}

variable "audit_push_endpoint" {
  type        = string
  description = "HTTPS URL of the audit function (its Cloud Run service URI). The audit subscription pushes to it."
}

variable "audit_push_service_account_email" {
  type        = string
  description = "Service account whose OIDC token the audit subscription attaches to each push; it holds roles/run.invoker on the audit function only."
}

variable "audit_ack_deadline_seconds" {
  type        = number
  description = "Seconds the audit function has to answer a push before Pub/Sub retries it (keep >= the function timeout)."
  default     = 60
}

variable "webhooks_push_endpoint" {
  type        = string
  description = "HTTPS URL of the webhooks function (its Cloud Run service URI). The webhooks subscription pushes to it."
}

variable "webhooks_push_service_account_email" {
  type        = string
  description = "Service account whose OIDC token the webhooks subscription attaches to each push; it holds roles/run.invoker on the webhooks function only."
}

variable "webhooks_ack_deadline_seconds" {
  type        = number
  description = "Seconds the webhooks function has to answer a push before Pub/Sub retries it (keep >= the function timeout)."
  default     = 60
}

variable "max_delivery_attempts" {
  type        = number
  description = "Deliveries of one message to the audit (or the webhooks) function before it is moved to the dead-letter topic (5-100)."
  default     = 10

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "Pub/Sub accepts 5 to 100 delivery attempts."
  }
}

variable "labels" {
  type        = map(string)
  description = "Labels set on topics and subscriptions."
  default     = {}
}
