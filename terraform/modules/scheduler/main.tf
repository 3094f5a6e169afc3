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

resource "google_cloud_run_v2_service_iam_member" "reaper_invoker" {
  project  = var.project_id
  location = var.region
  name     = var.reaper_service_name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.scheduler.email}"
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

  depends_on = [google_cloud_run_v2_service_iam_member.reaper_invoker]
}
