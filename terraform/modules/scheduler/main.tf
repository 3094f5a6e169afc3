# Cloud Scheduler calls the reaper every minute with an OIDC token of a dedicated service
# account (var.service_account_email); that account is the only principal with
# roles/run.invoker on the reaper.
# A missed or failed run loses nothing: acquire prunes expired leases itself and the
# next run drains the outboxes.

# The service account and its run.invoker grants on the reaper (one per region) are in
# modules/functions, on the function resources: a grant must wait for its service. The
# job only calls an endpoint, so it needs no such ordering: a run before the grant exists
# fails with 403 and the next minute's run succeeds. In a two-region stack the job
# follows the serving region (modules/stack: serving_region): after a failover it is
# replaced in the other region, the new one created before the old one is deleted,
# whose region may be the one that is down (its deletion may then fail; the new job
# runs already).
resource "google_cloud_scheduler_job" "reaper" {
  project          = var.project_id
  region           = var.region
  name             = "${var.name}-reaper"
  description      = "Reclaim expired seatlease leases and publish lease events"
  schedule         = var.schedule
  time_zone        = var.time_zone
  attempt_deadline = var.attempt_deadline
  paused           = var.paused

  retry_config {
    # Retries stay well inside the one-minute period; the next run catches up anyway.
    retry_count          = 2
    min_backoff_duration = "5s"
    max_backoff_duration = "20s"
    max_retry_duration   = "50s"
    max_doublings        = 2
  }

  http_target {
    uri         = var.reaper_uri
    http_method = "POST" # empty body, as the reaper's HTTP contract says

    oidc_token {
      service_account_email = var.service_account_email
      audience              = var.reaper_uri
    }
  }

  lifecycle {
    create_before_destroy = true
  }
}

# The webhook retries and the license alerts: webhooks-retry every minute, with the same
# identity (run.invoker on webhooks-retry in each region, modules/functions) and in the
# same region as the reaper. A missed run delays retries by a minute and loses nothing:
# the deliveries and the alerts' episodes are in Cloud SQL.
resource "google_cloud_scheduler_job" "webhooks_retry" {
  project          = var.project_id
  region           = var.region
  name             = "${var.name}-webhooks-retry"
  description      = "Send the seatlease webhook deliveries that are due and compute the license alerts"
  schedule         = var.webhooks_retry_schedule
  time_zone        = var.time_zone
  attempt_deadline = var.attempt_deadline
  paused           = var.paused

  retry_config {
    # The next minute's run does what a failed one left: no retries of the run itself.
    retry_count = 0
  }

  http_target {
    uri         = var.webhooks_retry_uri
    http_method = "POST"

    oidc_token {
      service_account_email = var.service_account_email
      audience              = var.webhooks_retry_uri
    }
  }

  lifecycle {
    create_before_destroy = true
  }
}
