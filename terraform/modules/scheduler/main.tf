# Cloud Scheduler calls the reaper every minute with an OIDC token of a dedicated service
# account; that account is the only principal with roles/run.invoker on the reaper.
# A missed or failed run loses nothing: acquire prunes expired leases itself and the
# next run drains the outboxes.

resource "google_service_account" "scheduler" {
  project      = var.project_id
  account_id   = "${var.name}-scheduler"
  display_name = "seatlease reaper scheduler"
  description  = "Identity Cloud Scheduler uses to invoke the reaper function."
}

# In a two-region stack the job and this grant follow the serving region (modules/stack:
# serving_region): after a failover they move to the other region, which replaces both.
# The new ones are created before the old ones are deleted, whose region may be the one
# that is down (its deletion may then fail; the new job runs already).
resource "google_cloud_run_v2_service_iam_member" "reaper_invoker" {
  project  = var.project_id
  location = var.region
  name     = var.reaper_service_name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.scheduler.email}"

  lifecycle {
    create_before_destroy = true
  }
}

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
      service_account_email = google_service_account.scheduler.email
      audience              = var.reaper_uri
    }
  }

  lifecycle {
    create_before_destroy = true
  }

  depends_on = [google_cloud_run_v2_service_iam_member.reaper_invoker]
}
