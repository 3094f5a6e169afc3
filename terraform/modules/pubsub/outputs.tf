output "topic_name" {
  description = "Short name of the lease event topic (PUBSUB_TOPIC)."
  value       = google_pubsub_topic.events.name
}

output "topic_id" {
  description = "Full id of the lease event topic (projects/P/topics/T)."
  value       = google_pubsub_topic.events.id
}

output "dead_letter_topic_name" {
  description = "Short name of the dead-letter topic."
  value       = google_pubsub_topic.dead_letter.name
}

output "dead_letter_subscription_name" {
  description = "Subscription that holds dead-lettered events (alerted on when not empty)."
  value       = google_pubsub_subscription.dead_letter.name
}

output "audit_subscription_name" {
  description = "Push subscription that delivers lease events to the audit function."
  value       = google_pubsub_subscription.audit.name
}

output "webhooks_subscription_name" {
  description = "Push subscription that delivers lease events to the webhooks function (its backlog is alerted on)."
  value       = google_pubsub_subscription.webhooks.name
}

output "webhooks_dead_letter_subscription_name" {
  description = "Subscription that holds the lease events the webhooks function could not queue (alerted on when not empty)."
  value       = google_pubsub_subscription.webhooks_dead_letter.name
}

output "pubsub_service_agent_email" {
  description = "Email of the project's Pub/Sub service agent (mints push OIDC tokens, forwards dead letters)."
  value       = local.pubsub_service_agent
}
