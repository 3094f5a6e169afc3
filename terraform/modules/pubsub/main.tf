# Lease events: the reaper drains the per-shard Redis outboxes into the seat-events
# topic; the audit function stores them in Cloud SQL (idempotently, unique event_id).
#
# Delivery to audit (design choice): a Pub/Sub trigger on a Cloud Function makes
# Eventarc create and own the push subscription, and neither google_cloudfunctions2_function
# nor google_eventarc_trigger can set a dead-letter policy on it (open provider issues;
# the workaround is a post-deploy `gcloud pubsub subscriptions update`, invisible to
# Terraform and lost when the trigger is recreated). Instead this module owns the push
# subscription: it pushes to the audit function's URL with an OIDC token, retries with
# exponential backoff while the function answers non-2xx (what RETRY_POLICY_RETRY does
# for an Eventarc trigger), and dead-letters after max_delivery_attempts. The audit
# function is still a CloudEvent function: the Functions Framework turns a Pub/Sub push
# body into the same google.cloud.pubsub.topic.v1.messagePublished CloudEvent (with
# data.message.data / attributes / messageId) that Eventarc would deliver.

data "google_project" "this" {
  project_id = var.project_id
}

locals {
  # Google-managed service agent that moves messages to the dead-letter topic and
  # mints the OIDC tokens of push subscriptions.
  pubsub_service_agent = "service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  dead_letter_name     = "${var.topic_name}-dead-letter"
  # The webhooks subscription's own (below).
  webhooks_dead_letter_name = "${var.topic_name}-webhooks-dead-letter"
}

resource "google_pubsub_topic" "events" {
  #checkov:skip=CKV_GCP_83:Lease events carry license/session ids only; Google-managed encryption keys are used on purpose (no CMEK key ring to operate).
  project                    = var.project_id
  name                       = var.topic_name
  message_retention_duration = var.message_retention_duration
  labels                     = var.labels
}

resource "google_pubsub_topic" "dead_letter" {
  #checkov:skip=CKV_GCP_83:Same payload as seat-events; Google-managed encryption keys.
  project                    = var.project_id
  name                       = local.dead_letter_name
  message_retention_duration = var.message_retention_duration
  labels                     = var.labels
}

# Without a subscription on the dead-letter topic, dead-lettered messages are dropped.
# This pull subscription keeps them (7 days) for inspection and replay; the monitoring
# module alerts as soon as it is not empty.
resource "google_pubsub_subscription" "dead_letter" {
  project                    = var.project_id
  name                       = "${local.dead_letter_name}-hold"
  topic                      = google_pubsub_topic.dead_letter.id
  ack_deadline_seconds       = 60
  message_retention_duration = var.message_retention_duration
  retain_acked_messages      = false
  labels                     = var.labels

  expiration_policy {
    ttl = "" # never expires, even when nobody pulls
  }
}

resource "google_pubsub_subscription" "audit" {
  project                    = var.project_id
  name                       = "${var.topic_name}-audit"
  topic                      = google_pubsub_topic.events.id
  ack_deadline_seconds       = var.audit_ack_deadline_seconds
  message_retention_duration = var.message_retention_duration
  labels                     = var.labels

  push_config {
    # The topic path in the URL lets the Functions Framework fill in the CloudEvent source.
    push_endpoint = "${var.audit_push_endpoint}/projects/${var.project_id}/topics/${var.topic_name}"

    oidc_token {
      service_account_email = var.audit_push_service_account_email
      audience              = var.audit_push_endpoint
    }
  }

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }
}

# The same events to the webhooks function, which queues a delivery per matching endpoint
# (in Cloud SQL, idempotent per endpoint and event) and answers 2xx once they are stored:
# the retries towards the receivers are the deliveries' own (3 days, in the database),
# not Pub/Sub's. Pub/Sub retries only what was not stored (503 on a database outage) and
# dead-letters it after max_delivery_attempts into a dead-letter topic of its own: the
# audit's replay (seatlease audit replay-dead-letters) stores events in the audit trail and
# acknowledges them, which would drop a webhook's dead letters were they mixed.
#
# retain_acked_messages: the subscription keeps what it acknowledged for
# message_retention_duration, so that `gcloud pubsub subscriptions seek` to a time before
# an outage pushes every event since then again; enqueue stores each (endpoint, event)
# once, so a replay queues only what was missing (docs/operations.md, "Webhooks").
resource "google_pubsub_topic" "webhooks_dead_letter" {
  #checkov:skip=CKV_GCP_83:Same payload as seat-events; Google-managed encryption keys.
  project                    = var.project_id
  name                       = local.webhooks_dead_letter_name
  message_retention_duration = var.message_retention_duration
  labels                     = var.labels
}

resource "google_pubsub_subscription" "webhooks_dead_letter" {
  project                    = var.project_id
  name                       = "${local.webhooks_dead_letter_name}-hold"
  topic                      = google_pubsub_topic.webhooks_dead_letter.id
  ack_deadline_seconds       = 60
  message_retention_duration = var.message_retention_duration
  retain_acked_messages      = false
  labels                     = var.labels

  expiration_policy {
    ttl = ""
  }
}

resource "google_pubsub_subscription" "webhooks" {
  project                    = var.project_id
  name                       = "${var.topic_name}-webhooks"
  topic                      = google_pubsub_topic.events.id
  ack_deadline_seconds       = var.webhooks_ack_deadline_seconds
  message_retention_duration = var.message_retention_duration
  retain_acked_messages      = true
  labels                     = var.labels

  push_config {
    push_endpoint = "${var.webhooks_push_endpoint}/projects/${var.project_id}/topics/${var.topic_name}"

    oidc_token {
      service_account_email = var.webhooks_push_service_account_email
      audience              = var.webhooks_push_endpoint
    }
  }

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.webhooks_dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }
}

resource "google_pubsub_topic_iam_member" "webhooks_dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.webhooks_dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${local.pubsub_service_agent}"
}

resource "google_pubsub_subscription_iam_member" "webhooks_dead_letter_subscriber" {
  project      = var.project_id
  subscription = google_pubsub_subscription.webhooks.name
  role         = "roles/pubsub.subscriber"
  member       = "serviceAccount:${local.pubsub_service_agent}"
}

# Dead-lettering needs the Pub/Sub service agent to publish to the dead-letter topic
# and to subscribe (acknowledge forwarded messages) on the source subscription.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.dead_letter.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${local.pubsub_service_agent}"
}

resource "google_pubsub_subscription_iam_member" "audit_dead_letter_subscriber" {
  project      = var.project_id
  subscription = google_pubsub_subscription.audit.name
  role         = "roles/pubsub.subscriber"
  member       = "serviceAccount:${local.pubsub_service_agent}"
}
