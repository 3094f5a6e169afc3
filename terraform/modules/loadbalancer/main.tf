# The global external Application Load Balancer in front of the client-facing functions
# of a two-region stack: one address, HTTPS with a Google-managed certificate for
# var.domains (and/or certificates given by id), a URL map routing /acquire, /heartbeat,
# /release, /keys, /portal (routing.tf says which backend takes which path, and why
# the stateful functions are served from one region at a time), backend services whose
# backends are serverless NEGs of the functions' Cloud Run services in both regions.

resource "google_compute_global_address" "this" {
  project      = var.project_id
  name         = "${var.name}-lb"
  description  = "seatlease: the load balancer's address (point the DNS names at it)"
  address_type = "EXTERNAL"
  ip_version   = "IPV4"
  labels       = var.labels
}

resource "google_compute_managed_ssl_certificate" "this" {
  count = length(var.domains) > 0 ? 1 : 0

  project = var.project_id
  # The name follows the domains: a certificate's domains cannot change in place, and
  # the proxy must hold the new one before the old one goes.
  name = "${var.name}-${substr(sha256(join(",", var.domains)), 0, 8)}"

  managed {
    domains = var.domains
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "google_compute_ssl_policy" "this" {
  project         = var.project_id
  name            = "${var.name}-tls"
  description     = "seatlease: TLS 1.2 and later, modern cipher suites"
  profile         = "MODERN"
  min_tls_version = "TLS_1_2"
}

# Cloud Armor on every backend service: the functions' ingress admits the load balancer
# only (two regions), so this is where a flood is stopped before it reaches a function
# and its Redis. A per-client-IP rate limit (the functions' per-tenant limits come after
# it: a client without a valid API key costs a function call, which this bounds), and
# the Log4j probe rule checkov asks for. var.security_policy: a policy managed
# elsewhere instead.
resource "google_compute_security_policy" "this" {
  count = var.security_policy == null ? 1 : 0

  project     = var.project_id
  name        = "${var.name}-armor"
  description = "seatlease: per-client-IP rate limit in front of the functions"
  type        = "CLOUD_ARMOR"

  rule {
    action      = "deny(403)"
    priority    = 900
    description = "Log4j lookup probes (CVE-2021-44228)"
    match {
      expr {
        expression = "evaluatePreconfiguredExpr('cve-canary')"
      }
    }
  }

  rule {
    action      = "throttle"
    priority    = 1000
    description = "At most rate_limit_per_ip requests a minute from one client IP, then 429"
    match {
      versioned_expr = "SRC_IPS_V1"
      config {
        src_ip_ranges = ["*"]
      }
    }
    rate_limit_options {
      conform_action = "allow"
      exceed_action  = "deny(429)"
      enforce_on_key = "IP"
      rate_limit_threshold {
        count        = var.rate_limit_per_ip
        interval_sec = 60
      }
    }
  }

  rule {
    action      = "allow"
    priority    = 2147483647
    description = "Everything else"
    match {
      versioned_expr = "SRC_IPS_V1"
      config {
        src_ip_ranges = ["*"]
      }
    }
  }
}

locals {
  security_policy = var.security_policy != null ? var.security_policy : google_compute_security_policy.this[0].id
}

# The load balancer's own 5xx: what a lost region shows first to clients (the
# functions' 5xx alerts count the functions' log lines and Cloud Run's request counts,
# and a lost region writes neither).
resource "google_monitoring_alert_policy" "lb_5xx" {
  project               = var.project_id
  display_name          = "${var.name}: load balancer answers 5xx"
  combiner              = "OR"
  notification_channels = var.notification_channels

  conditions {
    display_name = "5xx per second at the load balancer, by backend"
    condition_threshold {
      filter          = "resource.type=\"https_lb_rule\" AND resource.labels.forwarding_rule_name=\"${var.name}-https\" AND metric.type=\"loadbalancing.googleapis.com/https/request_count\" AND metric.labels.response_code_class=500"
      comparison      = "COMPARISON_GT"
      threshold_value = var.lb_5xx_per_second
      duration        = "120s"
      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_RATE"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["resource.labels.backend_target_name"]
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    mime_type = "text/markdown"
    content   = "The load balancer ${var.name}-https answers more than ${var.lb_5xx_per_second} 5xx a second for one backend (backend_target_name: NAME-FUNCTION-REGION). One region's backends only, statusDetails failed_to_connect_to_backend or failed_to_pick_backend: that region may be lost (docs/operations.md, \"A region lost\", Detect). Every backend: the functions themselves (their logs)."
  }

  alert_strategy {
    auto_close = "1800s"
  }
}

# Gen2 functions are Cloud Run services: their NEG is a cloud_run one (the cloud_function
# kind serves 1st gen functions).
resource "google_compute_region_network_endpoint_group" "this" {
  for_each = local.negs

  project               = var.project_id
  name                  = "${var.name}-${each.key}"
  region                = each.value.region
  network_endpoint_type = "SERVERLESS"

  cloud_run {
    service = each.value.service
  }
}

# serving_functions: one backend service per function and region (routing.tf).
resource "google_compute_backend_service" "serving" {
  for_each = local.serving_backends

  project               = var.project_id
  name                  = "${var.name}-${each.key}"
  description           = "seatlease ${each.value.function} in ${each.value.region}"
  load_balancing_scheme = "EXTERNAL_MANAGED"
  protocol              = "HTTPS"
  security_policy       = local.security_policy

  backend {
    group = google_compute_region_network_endpoint_group.this[each.key].id
  }

  log_config {
    enable      = true
    sample_rate = var.log_sample_rate
  }
}

# everywhere_functions: one backend service with every region's NEG. The nearest region
# answers; a region whose function answers 5xx in a row is ejected for a while and the
# other one takes its requests (serverless NEGs have no health checks: outlier detection
# is what notices a lost region).
resource "google_compute_backend_service" "everywhere" {
  for_each = toset(var.everywhere_functions)

  project               = var.project_id
  name                  = "${var.name}-${each.key}"
  description           = "seatlease ${each.key} in every region"
  load_balancing_scheme = "EXTERNAL_MANAGED"
  protocol              = "HTTPS"
  security_policy       = local.security_policy

  dynamic "backend" {
    for_each = local.regions
    content {
      group = google_compute_region_network_endpoint_group.this["${each.key}-${backend.value}"].id
    }
  }

  outlier_detection {
    consecutive_errors           = var.outlier_consecutive_errors
    enforcing_consecutive_errors = 100
    max_ejection_percent         = 50
    interval {
      seconds = 10
    }
    base_ejection_time {
      seconds = 30
    }
  }

  log_config {
    enable      = true
    sample_rate = var.log_sample_rate
  }
}

locals {
  backend_ids = merge(
    { for key, b in google_compute_backend_service.serving : "serving/${key}" => b.id },
    { for fn, b in google_compute_backend_service.everywhere : "everywhere/${fn}" => b.id },
  )
}

resource "google_compute_url_map" "this" {
  project         = var.project_id
  name            = var.name
  description     = "seatlease: each function's path to its backend (serving region ${var.serving_region})"
  default_service = local.backend_ids[local.default_route]

  host_rule {
    hosts        = ["*"]
    path_matcher = "functions"
  }

  path_matcher {
    name            = "functions"
    default_service = local.backend_ids[local.default_route]

    dynamic "path_rule" {
      for_each = local.routes
      content {
        paths   = local.paths[path_rule.key]
        service = local.backend_ids[path_rule.value]
      }
    }
  }

  # Checked by the API whenever the map changes: each path reaches its backend.
  dynamic "test" {
    for_each = local.routes
    content {
      description = "${test.key} goes to ${test.value}"
      host        = local.test_host
      path        = "/${test.key}"
      service     = local.backend_ids[test.value]
    }
  }
}

resource "google_compute_target_https_proxy" "this" {
  project          = var.project_id
  name             = "${var.name}-https"
  url_map          = google_compute_url_map.this.id
  ssl_certificates = concat(google_compute_managed_ssl_certificate.this[*].id, var.ssl_certificates)
  ssl_policy       = google_compute_ssl_policy.this.id
}

resource "google_compute_global_forwarding_rule" "https" {
  project               = var.project_id
  name                  = "${var.name}-https"
  load_balancing_scheme = "EXTERNAL_MANAGED"
  ip_protocol           = "TCP"
  port_range            = "443"
  ip_address            = google_compute_global_address.this.id
  target                = google_compute_target_https_proxy.this.id
  labels                = var.labels
}
