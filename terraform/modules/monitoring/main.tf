# Log-based metrics over the JSON lines the functions print (one object per line on
# stdout: severity, message, and for acquire/heartbeat/release: function, outcome,
# status, license_id, tenant_id, seats_used, seats_total, latency_ms; the reaper prints
# one "reaper run" line per run with reclaimed, published, outbox_backlog,
# shards_swept, duration_ms, denials), alert policies and a dashboard.

# Two filter languages meet here, with different syntax for "one of these values":
#   * log-based metric filters use the Logging query language:
#       field=("a" OR "b")
#   * alert conditions and dashboard charts use Monitoring filters:
#       field=one_of("a", "b")
# tests/terraform/test_filters.py parses every filter of this module with a grammar of
# its own language and runs each log-based metric's filter on the lines the code logs.
locals {
  run_logs      = "resource.type=\"cloud_run_revision\""
  client_names  = join(" OR ", [for f in var.client_functions : "\"${f}\""])
  client_one_of = "one_of(${join(", ", [for f in var.client_functions : "\"${f}\""])})"
  client_filter = "${local.run_logs} AND resource.labels.service_name=(${local.client_names}) AND jsonPayload.function=(${local.client_names})"
  reaper_filter = "${local.run_logs} AND resource.labels.service_name=\"${var.reaper_service_name}\""
  reaper_run    = "${local.reaper_filter} AND jsonPayload.message=\"reaper run\" AND severity<ERROR"

  metric_prefix = "logging.googleapis.com/user"

  # Distribution metrics extracted from the reaper's summary line.
  reaper_values = {
    reaper_reclaimed      = { field = "reclaimed", unit = "1", description = "Leases reclaimed by one reaper run" }
    reaper_published      = { field = "published", unit = "1", description = "Events published to Pub/Sub by one reaper run" }
    reaper_outbox_backlog = { field = "outbox_backlog", unit = "1", description = "Events left in the Redis outboxes after a reaper run" }
    reaper_duration       = { field = "duration_ms", unit = "ms", description = "Duration of one reaper run" }
    reaper_denials        = { field = "denials", unit = "1", description = "Denials counted (flushed) by one reaper run" }
  }

  notification = {
    channels = var.notification_channels
  }

  # Thresholds as percentages in alert texts. Terraform's numbers are exact decimals in
  # Terraform's numbers are wide binary floats printed in full: 0.02 * 100 renders as
  # 1.99999... with 150 digits. Six significant digits ("%.6g") give "2", "70", "2.5".
  error_ratio_percent        = format("%.6g", var.error_ratio_threshold * 100)
  redis_memory_ratio_percent = format("%.6g", var.redis_memory_ratio_threshold * 100)

  redis_memory_filter = (var.redis_is_cluster
    ? "metric.type=\"redis.googleapis.com/cluster/memory/maximum_utilization\" AND resource.type=\"redis.googleapis.com/Cluster\""
    : "metric.type=\"redis.googleapis.com/stats/memory/usage_ratio\" AND resource.type=\"redis_instance\" AND resource.labels.instance_id=\"${var.redis_instance_id}\""
  )
}

# ---------------------------------------------------------------------------------
# Log-based metrics
# ---------------------------------------------------------------------------------

resource "google_logging_metric" "client_requests" {
  project     = var.project_id
  name        = "seatlease/client_requests"
  description = "Requests to acquire/heartbeat/release, by function, outcome and HTTP status"
  filter      = "${local.client_filter} AND jsonPayload.status:*"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key        = "function"
      value_type = "STRING"
    }
    labels {
      key        = "outcome"
      value_type = "STRING"
    }
    labels {
      key        = "status"
      value_type = "STRING"
    }
  }

  label_extractors = {
    function = "EXTRACT(jsonPayload.function)"
    outcome  = "EXTRACT(jsonPayload.outcome)"
    status   = "EXTRACT(jsonPayload.status)"
  }
}

resource "google_logging_metric" "client_5xx" {
  project     = var.project_id
  name        = "seatlease/client_5xx"
  description = "acquire/heartbeat/release requests answered with a 5xx status"
  filter      = "${local.client_filter} AND jsonPayload.status>=500"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key        = "function"
      value_type = "STRING"
    }
  }

  label_extractors = {
    function = "EXTRACT(jsonPayload.function)"
  }
}

resource "google_logging_metric" "denials" {
  project     = var.project_id
  name        = "seatlease/denials"
  description = "Acquires denied because every seat of the license was taken"
  filter      = "${local.client_filter} AND jsonPayload.outcome=\"no_seats_available\""

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
    labels {
      key        = "license_id"
      value_type = "STRING"
    }
  }

  label_extractors = {
    license_id = "EXTRACT(jsonPayload.license_id)"
  }
}

resource "google_logging_metric" "client_latency" {
  project         = var.project_id
  name            = "seatlease/client_latency"
  description     = "Server-side latency of acquire/heartbeat/release (latency_ms)"
  filter          = "${local.client_filter} AND jsonPayload.latency_ms:*"
  value_extractor = "EXTRACT(jsonPayload.latency_ms)"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "ms"
    labels {
      key        = "function"
      value_type = "STRING"
    }
  }

  label_extractors = {
    function = "EXTRACT(jsonPayload.function)"
  }

  bucket_options {
    exponential_buckets {
      num_finite_buckets = 40
      growth_factor      = 1.4
      scale              = 0.5
    }
  }
}

resource "google_logging_metric" "seats_used" {
  project         = var.project_id
  name            = "seatlease/seats_used"
  description     = "Seats in use on a license, as reported by each acquire/heartbeat/release"
  filter          = "${local.client_filter} AND jsonPayload.seats_used:* AND jsonPayload.license_id:*"
  value_extractor = "EXTRACT(jsonPayload.seats_used)"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = "1"
    labels {
      key        = "license_id"
      value_type = "STRING"
    }
    labels {
      key        = "tenant_id"
      value_type = "STRING"
    }
  }

  label_extractors = {
    license_id = "EXTRACT(jsonPayload.license_id)"
    tenant_id  = "EXTRACT(jsonPayload.tenant_id)"
  }

  bucket_options {
    exponential_buckets {
      num_finite_buckets = 64
      growth_factor      = 1.25
      scale              = 1
    }
  }
}

resource "google_logging_metric" "reaper_runs" {
  project     = var.project_id
  name        = "seatlease/reaper_runs"
  description = "Successful reaper runs (one \"reaper run\" summary line each)"
  filter      = local.reaper_run

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
  }
}

resource "google_logging_metric" "reaper_errors" {
  project     = var.project_id
  name        = "seatlease/reaper_errors"
  description = "Log lines of severity ERROR or worse from the reaper"
  filter      = "${local.reaper_filter} AND severity>=ERROR"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"
  }
}

resource "google_logging_metric" "reaper_value" {
  for_each = local.reaper_values

  project         = var.project_id
  name            = "seatlease/${each.key}"
  description     = each.value.description
  filter          = "${local.reaper_run} AND jsonPayload.${each.value.field}:*"
  value_extractor = "EXTRACT(jsonPayload.${each.value.field})"

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "DISTRIBUTION"
    unit        = each.value.unit
  }

  bucket_options {
    exponential_buckets {
      num_finite_buckets = 64
      growth_factor      = 1.25
      scale              = 1
    }
  }
}

# ---------------------------------------------------------------------------------
# Alert policies
# ---------------------------------------------------------------------------------

# A log-based metric becomes visible to Cloud Monitoring only some minutes after it is
# created: an alert policy on it, created in the same apply, fails with "404 Cannot find
# metric(s) ... it could take up to 10 minutes to become available" (open provider issue
# hashicorp/terraform-provider-google#11102). The policies and the dashboard therefore
# read the metric names from this wait, which is created after the metrics and takes
# var.log_metric_visibility_wait. It is replaced, and waits again, only when the set of
# metric names changes; on the first apply it runs alongside Cloud SQL's creation, so
# it costs no extra time there.
resource "time_sleep" "log_metrics_visible" {
  create_duration = var.log_metric_visibility_wait
  triggers = merge(
    {
      client_requests = google_logging_metric.client_requests.name
      client_5xx      = google_logging_metric.client_5xx.name
      denials         = google_logging_metric.denials.name
      client_latency  = google_logging_metric.client_latency.name
      seats_used      = google_logging_metric.seats_used.name
      reaper_runs     = google_logging_metric.reaper_runs.name
      reaper_errors   = google_logging_metric.reaper_errors.name
    },
    { for k, m in google_logging_metric.reaper_value : k => m.name },
  )
}

locals {
  # Time-series filter of each log-based metric above, by metric short name (through
  # the wait above, so that nothing uses a metric before Monitoring knows it).
  user_metric = {
    for k, m in time_sleep.log_metrics_visible.triggers :
    k => "metric.type=\"${local.metric_prefix}/${m}\" AND resource.type=\"cloud_run_revision\""
  }

  # The policies made of one threshold condition (value above threshold for duration),
  # one google_monitoring_alert_policy.threshold each. Aggregation: per_series_aligner
  # over alignment_period, then cross_series_reducer.
  threshold_alerts = {
    crash_wave = {
      title         = "crash wave (many seats reclaimed)"
      condition     = "seats reclaimed per minute above ${var.reclaimed_per_minute_threshold}"
      filter        = local.user_metric.reaper_reclaimed
      threshold     = var.reclaimed_per_minute_threshold
      duration      = "0s"
      period        = "60s"
      aligner       = "ALIGN_PERCENTILE_99"
      reducer       = "REDUCE_MAX"
      auto_close    = "3600s"
      documentation = "A reaper run reclaimed more than ${var.reclaimed_per_minute_threshold} expired leases: many clients stopped heartbeating at once (client crash, network partition, bad client release)."
    }
    denials = {
      title         = "seat denials rate"
      condition     = "denials per minute above ${var.denials_per_minute_threshold}"
      filter        = local.user_metric.denials
      threshold     = var.denials_per_minute_threshold
      duration      = "300s"
      period        = "60s"
      aligner       = "ALIGN_DELTA"
      reducer       = "REDUCE_SUM"
      auto_close    = "3600s"
      documentation = "Acquires are being denied (409 no_seats_available) more than ${var.denials_per_minute_threshold} times a minute: a customer is over their seat count, or zombie seats are not coming back (check the reaper alert)."
    }
    outbox_backlog = {
      title         = "event outbox backlog"
      condition     = "outbox backlog above ${var.outbox_backlog_threshold} for 10 minutes"
      filter        = local.user_metric.reaper_outbox_backlog
      threshold     = var.outbox_backlog_threshold
      duration      = "600s"
      period        = "300s"
      aligner       = "ALIGN_PERCENTILE_99"
      reducer       = "REDUCE_MAX"
      auto_close    = "3600s"
      documentation = "Lease events are accumulating in the Redis outboxes faster than the reaper publishes them (Pub/Sub errors or throttling?). They are not lost, but they use Redis memory (noeviction) and delay the audit log."
    }
    dead_letters = {
      title         = "lease events dead-lettered"
      condition     = "dead-letter subscription not empty"
      filter        = "metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND resource.type=\"pubsub_subscription\" AND resource.labels.subscription_id=\"${var.dead_letter_subscription_name}\""
      threshold     = 0
      duration      = "0s"
      period        = "60s"
      aligner       = "ALIGN_MAX"
      reducer       = "REDUCE_SUM"
      auto_close    = "86400s"
      documentation = "The audit function failed to store some lease events after every retry; they wait in subscription ${var.dead_letter_subscription_name} (kept 7 days). Fix the cause, then replay them to the seat-events topic."
    }
    webhooks_dead_letters = {
      title         = "lease events not queued for webhooks"
      condition     = "webhooks dead-letter subscription not empty"
      filter        = "metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND resource.type=\"pubsub_subscription\" AND resource.labels.subscription_id=\"${var.webhooks_dead_letter_subscription_name}\""
      threshold     = 0
      duration      = "0s"
      period        = "60s"
      aligner       = "ALIGN_MAX"
      reducer       = "REDUCE_SUM"
      auto_close    = "86400s"
      documentation = "The webhooks function failed to queue some lease events' deliveries after every retry (Cloud SQL down for long, or a bug); they wait in subscription ${var.webhooks_dead_letter_subscription_name} (kept 7 days) and no receiver has heard of them. Fix the cause, then seek the webhooks subscription back to before the first failure: docs/operations.md, \"Webhooks\"."
    }
    # Webhooks: both come from Google's own metrics (no log-based metric to keep).
    webhooks_backlog = {
      title         = "webhook events not queued"
      condition     = "oldest lease event unacknowledged by the webhooks function for over ${var.webhooks_backlog_seconds} s"
      filter        = "metric.type=\"pubsub.googleapis.com/subscription/oldest_unacked_message_age\" AND resource.type=\"pubsub_subscription\" AND resource.labels.subscription_id=\"${var.webhooks_subscription_name}\""
      threshold     = var.webhooks_backlog_seconds
      duration      = "300s"
      period        = "60s"
      aligner       = "ALIGN_MAX"
      reducer       = "REDUCE_MAX"
      auto_close    = "3600s"
      documentation = "The webhooks function has not stored lease events for over ${var.webhooks_backlog_seconds} s (subscription ${var.webhooks_subscription_name}): Cloud SQL down or full, the function failing (its logs), or a burst larger than its max_instances can queue. Nothing is lost until the messages are dead-lettered; receivers hear of the events late. docs/operations.md, \"Webhooks\"."
    }
    webhooks_failing = {
      title         = "webhook functions failing"
      condition     = "webhooks or webhooks-retry answered 5xx for 10 minutes"
      filter        = "metric.type=\"run.googleapis.com/request_count\" AND resource.type=\"cloud_run_revision\" AND resource.labels.service_name=one_of(\"webhooks\", \"webhooks-retry\") AND metric.labels.response_code_class=\"5xx\""
      threshold     = 0
      duration      = "600s"
      period        = "300s"
      aligner       = "ALIGN_DELTA"
      reducer       = "REDUCE_SUM"
      auto_close    = "3600s"
      documentation = "The webhooks function (Pub/Sub push) or webhooks-retry (every minute: retries and license alerts) keeps failing: deliveries and alerts wait in Cloud SQL until it recovers (their 3-day retry window runs meanwhile). A receiver's failures are not this: those are per endpoint (`seatlease webhook deliveries`, the endpoint's failing state). docs/operations.md, \"Webhooks\"."
    }
    redis_memory = {
      title         = "Redis memory above ${local.redis_memory_ratio_percent}%"
      condition     = "Redis memory usage ratio above ${var.redis_memory_ratio_threshold}"
      filter        = local.redis_memory_filter
      threshold     = var.redis_memory_ratio_threshold
      duration      = "60s"
      period        = "60s"
      aligner       = "ALIGN_MAX"
      reducer       = "REDUCE_MAX"
      auto_close    = "3600s"
      documentation = "Redis runs with maxmemory-policy=noeviction: when memory is full, every tenant's acquires and heartbeats fail (503) instead of leases being silently evicted. This fires with 30% of memory left, sized for at most 50% in normal use: see what grows with `seatlease capacity` (live leases? replies: a tenant's rate limit too high? the outbox backlog: Pub/Sub down?), then scale memory_size_gb by the formula in docs/operations.md (Capacity)."
    }
  }

  # The 5xx rate is watched twice, with the same ratio logic: in the functions' own log
  # lines, and in Cloud Run's request count, because crashes, timeouts and out-of-memory
  # kills never reach the function's own log line. (A list: the order of the conditions
  # stays as deployed.)
  client_run_requests = "metric.type=\"run.googleapis.com/request_count\" AND resource.type=\"cloud_run_revision\" AND resource.labels.service_name=${local.client_one_of}"
  client_5xx_conditions = [
    {
      requests    = "logged client requests"
      filter      = local.user_metric.client_5xx
      denominator = local.user_metric.client_requests
    },
    {
      requests    = "Cloud Run requests"
      filter      = "${local.client_run_requests} AND metric.labels.response_code_class=\"5xx\""
      denominator = local.client_run_requests
    },
  ]
}

resource "google_monitoring_alert_policy" "threshold" {
  for_each = local.threshold_alerts

  project               = var.project_id
  display_name          = "${var.name}: ${each.value.title}"
  combiner              = "OR"
  notification_channels = local.notification.channels

  conditions {
    display_name = each.value.condition
    condition_threshold {
      filter          = each.value.filter
      comparison      = "COMPARISON_GT"
      threshold_value = each.value.threshold
      duration        = each.value.duration
      aggregations {
        alignment_period     = each.value.period
        per_series_aligner   = each.value.aligner
        cross_series_reducer = each.value.reducer
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = each.value.documentation
  }

  alert_strategy {
    auto_close = each.value.auto_close
  }
}

resource "google_monitoring_alert_policy" "reaper" {
  project               = var.project_id
  display_name          = "${var.name}: reaper failing or stalled"
  combiner              = "OR"
  notification_channels = local.notification.channels

  conditions {
    display_name = "reaper logged an error"
    condition_threshold {
      filter          = local.user_metric.reaper_errors
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_DELTA"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }

  conditions {
    display_name = "no successful reaper run"
    condition_absent {
      filter   = local.user_metric.reaper_runs
      duration = var.reaper_stalled_after
      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_DELTA"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "The reaper (Cloud Scheduler, every minute) logged an error or has not logged a successful \"reaper run\" for ${var.reaper_stalled_after}. Seat availability stays exact (acquire prunes expired leases itself) but lease events pile up in the Redis outboxes and the audit log falls behind. Check the scheduler job, then the reaper logs (Redis or Pub/Sub unreachable?)."
  }

  alert_strategy {
    auto_close = "1800s"
  }
}

resource "google_monitoring_alert_policy" "client_5xx" {
  project               = var.project_id
  display_name          = "${var.name}: client API 5xx rate"
  combiner              = "OR"
  notification_channels = local.notification.channels

  dynamic "conditions" {
    for_each = local.client_5xx_conditions
    content {
      display_name = "5xx share of ${conditions.value.requests} above ${var.error_ratio_threshold}"
      condition_threshold {
        filter             = conditions.value.filter
        denominator_filter = conditions.value.denominator
        comparison         = "COMPARISON_GT"
        threshold_value    = var.error_ratio_threshold
        duration           = "300s"
        aggregations {
          alignment_period     = "60s"
          per_series_aligner   = "ALIGN_RATE"
          cross_series_reducer = "REDUCE_SUM"
        }
        denominator_aggregations {
          alignment_period     = "60s"
          per_series_aligner   = "ALIGN_RATE"
          cross_series_reducer = "REDUCE_SUM"
        }
        trigger {
          count = 1
        }
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "More than ${local.error_ratio_percent}% of acquire/heartbeat/release requests fail with 5xx for 5 minutes (503 backend_unavailable: Redis or Cloud SQL unreachable; 500: a bug)."
  }

  alert_strategy {
    auto_close = "1800s"
  }
}

# ---------------------------------------------------------------------------------
# Dashboard
# ---------------------------------------------------------------------------------

locals {
  dashboard_charts = [
    {
      title     = "Seats used per license (max)"
      filter    = local.user_metric.seats_used
      aligner   = "ALIGN_PERCENTILE_99"
      reducer   = "REDUCE_MAX"
      group_by  = ["metric.label.license_id"]
      plot_type = "LINE"
    },
    {
      title     = "Acquires per minute by outcome"
      filter    = "${local.user_metric.client_requests} AND metric.labels.function=\"acquire\""
      aligner   = "ALIGN_DELTA"
      reducer   = "REDUCE_SUM"
      group_by  = ["metric.label.outcome"]
      plot_type = "STACKED_BAR"
    },
    {
      title     = "Denials per minute by license"
      filter    = local.user_metric.denials
      aligner   = "ALIGN_DELTA"
      reducer   = "REDUCE_SUM"
      group_by  = ["metric.label.license_id"]
      plot_type = "STACKED_BAR"
    },
    {
      title     = "Seats reclaimed per reaper run"
      filter    = local.user_metric.reaper_reclaimed
      aligner   = "ALIGN_PERCENTILE_99"
      reducer   = "REDUCE_MAX"
      group_by  = []
      plot_type = "LINE"
    },
    {
      title     = "Client latency p50 (ms)"
      filter    = local.user_metric.client_latency
      aligner   = "ALIGN_PERCENTILE_50"
      reducer   = "REDUCE_MAX"
      group_by  = ["metric.label.function"]
      plot_type = "LINE"
    },
    {
      title     = "Client latency p99 (ms)"
      filter    = local.user_metric.client_latency
      aligner   = "ALIGN_PERCENTILE_99"
      reducer   = "REDUCE_MAX"
      group_by  = ["metric.label.function"]
      plot_type = "LINE"
    },
    {
      title     = "Requests per minute by function and status"
      filter    = local.user_metric.client_requests
      aligner   = "ALIGN_DELTA"
      reducer   = "REDUCE_SUM"
      group_by  = ["metric.label.function", "metric.label.status"]
      plot_type = "STACKED_BAR"
    },
    {
      title     = "Outbox backlog after each reaper run"
      filter    = local.user_metric.reaper_outbox_backlog
      aligner   = "ALIGN_PERCENTILE_99"
      reducer   = "REDUCE_MAX"
      group_by  = []
      plot_type = "LINE"
    },
  ]

  # The tiles as the Monitoring API returns them: it drops fields at their zero value
  # (xPos = 0, yPos = 0, groupByFields = []), so a dashboard sent with them differs from
  # the one read back and every plan shows a change (hashicorp/terraform-provider-google
  # #16173). Each is therefore sent only when non-zero or non-empty.
  dashboard_json = jsonencode({
    displayName = "${var.name}: seats"
    mosaicLayout = {
      columns = 12
      tiles = [for i, c in local.dashboard_charts : merge(
        { for k, v in { xPos = (i % 2) * 6, yPos = floor(i / 2) * 4 } : k => v if v != 0 },
        {
          width  = 6
          height = 4
          widget = {
            title = c.title
            xyChart = {
              dataSets = [{
                plotType = c.plot_type
                timeSeriesQuery = {
                  timeSeriesFilter = {
                    filter = c.filter
                    aggregation = merge(
                      {
                        alignmentPeriod    = "60s"
                        perSeriesAligner   = c.aligner
                        crossSeriesReducer = c.reducer
                      },
                      { for k, v in { groupByFields = c.group_by } : k => v if length(v) > 0 },
                    )
                  }
                }
              }]
            }
          }
        },
      )]
    }
  })
}

resource "google_monitoring_dashboard" "seatlease" {
  project        = var.project_id
  dashboard_json = local.dashboard_json
}

# ---------------------------------------------------------------------------------
# A log-based alert: a license ends soon
# ---------------------------------------------------------------------------------

locals {
  # The audit function's line for each license.expiring notice it stores (the reaper
  # sends one per license at each threshold before its expires_at, 30, 7 and 1 days by
  # default: LICENSE_NOTICE_DAYS). Logging query language, like the metrics' filters.
  license_expiring_log = "${local.run_logs} AND resource.labels.service_name=\"${var.audit_service_name}\" AND jsonPayload.message=\"license notice\" AND jsonPayload.type=\"license.expiring\""
}

resource "google_monitoring_alert_policy" "license_expiring" {
  project               = var.project_id
  display_name          = "${var.name}: a license expires soon"
  combiner              = "OR"
  notification_channels = local.notification.channels

  conditions {
    display_name = "license.expiring notice stored"
    condition_matched_log {
      filter = local.license_expiring_log
      label_extractors = {
        tenant_id      = "EXTRACT(jsonPayload.tenant_id)"
        license_id     = "EXTRACT(jsonPayload.license_id)"
        expires_at     = "EXTRACT(jsonPayload.expires_at)"
        threshold_days = "EXTRACT(jsonPayload.threshold_days)"
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "License $${log.extracted_label.license_id} of tenant $${log.extracted_label.tenant_id} expires at $${log.extracted_label.expires_at} (the $${log.extracted_label.threshold_days}-day notice). Renew it before its end and grace (`seatlease license update --renew-for 365d`), or let the customer know: from then on it grants no seat and, with on_expiry end_leases, ends the seats in use. `seatlease license list --expiring 30d` lists every license ending soon."
  }

  alert_strategy {
    # one notification per license notice; a log-matched incident closes by itself
    notification_rate_limit {
      period = "300s"
    }
    auto_close = "604800s"
  }
}
