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
  security_policy       = var.security_policy

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
  security_policy       = var.security_policy

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
