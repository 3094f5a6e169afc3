# VPC for seatlease: one subnet for Direct VPC egress of the functions, one small subnet
# for Private Service Connect (Memorystore for Redis Cluster), and a private services
# access range peered with Google's service producer network (Cloud SQL private IP and
# Memorystore for Redis in PRIVATE_SERVICE_ACCESS mode).

resource "google_compute_network" "this" {
  project                 = var.project_id
  name                    = var.name
  auto_create_subnetworks = false
  routing_mode            = "REGIONAL"
}

# Two subnets, same settings (Private Google Access, flow logs): "functions" for Direct
# VPC egress of the functions, "psc" for the Private Service Connect endpoints of
# Memorystore for Redis Cluster.
locals {
  subnet_cidrs = {
    functions = var.functions_subnet_cidr
    psc       = var.psc_subnet_cidr
  }
}

resource "google_compute_subnetwork" "this" {
  for_each = local.subnet_cidrs

  project                  = var.project_id
  name                     = "${var.name}-${each.key}"
  region                   = var.region
  network                  = google_compute_network.this.id
  ip_cidr_range            = each.value
  private_ip_google_access = true

  log_config {
    aggregation_interval = "INTERVAL_5_MIN"
    flow_sampling        = var.flow_log_sampling
    metadata             = "INCLUDE_ALL_METADATA"
  }
}

# Private services access: an internal range reserved for Google-managed services and
# the peering that uses it. Cloud SQL (private IP) and Memorystore for Redis
# (connect_mode = PRIVATE_SERVICE_ACCESS) both need this connection before creation.
resource "google_compute_global_address" "private_services" {
  project       = var.project_id
  name          = "${var.name}-private-services"
  purpose       = "VPC_PEERING"
  address_type  = "INTERNAL"
  prefix_length = var.private_services_prefix_length
  network       = google_compute_network.this.id
}

resource "google_service_networking_connection" "private_services" {
  network                 = google_compute_network.this.id
  service                 = "servicenetworking.googleapis.com"
  reserved_peering_ranges = [google_compute_global_address.private_services.name]
}

# The functions only open connections out of the VPC (egress); nothing listens inside it.
# VPC networks deny ingress by default; this explicit rule documents that and makes
# the deny visible in firewall logs.
resource "google_compute_firewall" "deny_all_ingress" {
  project   = var.project_id
  name      = "${var.name}-deny-all-ingress"
  network   = google_compute_network.this.id
  direction = "INGRESS"
  priority  = 65534

  deny {
    protocol = "all"
  }

  source_ranges = ["0.0.0.0/0"]

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}
