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
    functions = local.functions_subnet_cidr # sizing.tf
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

# Destroying the connection fails with "Producer services (e.g. CloudSQL, Cloud
# Memstore, etc.) are still using this connection": Cloud SQL keeps its producer
# resources for days after the instance is deleted (provider issues #16275, #19908).
# ABANDON removes the connection from the state without calling the API; the VPC peering
# it created would then still block deleting the network, so the peering is removed on
# destroy by terraform_data.private_services_peering below, after every instance that
# uses it is gone. (Provider 8.x has deletion_policy = "REMOVE_PEERING" for this; this
# configuration stays on 7.x.) update_on_creation_fail lets a new stack with the same
# network name take over the connection the service producer still remembers.
resource "google_service_networking_connection" "private_services" {
  network                 = google_compute_network.this.id
  service                 = "servicenetworking.googleapis.com"
  reserved_peering_ranges = [google_compute_global_address.private_services.name]
  deletion_policy         = "ABANDON"
  update_on_creation_fail = true
}

# The peering of the connection above, removed on destroy (gcloud compute networks
# peerings delete, what the console's "remove peering" does). Cloud SQL and Redis take
# the connection through this resource's output, so a destroy removes them first, then
# the peering, then the reserved range and the network.
resource "terraform_data" "private_services_peering" {
  input = {
    project    = var.project_id
    network    = google_compute_network.this.name
    peering    = google_service_networking_connection.private_services.peering
    connection = google_service_networking_connection.private_services.id
  }

  provisioner "local-exec" {
    when        = destroy
    interpreter = ["/bin/sh", "-c"]
    command     = <<-EOT
      command -v gcloud >/dev/null || { echo "gcloud is needed to remove VPC peering $PEERING" >&2; exit 1; }
      if gcloud compute networks peerings list --project="$PROJECT" --network="$NETWORK" --format="value(name)" | grep -qx "$PEERING"; then
        gcloud compute networks peerings delete "$PEERING" --project="$PROJECT" --network="$NETWORK" --quiet
      fi
    EOT
    environment = {
      PROJECT = self.input.project
      NETWORK = self.input.network
      PEERING = self.input.peering
    }
  }
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

# The functions that call customers' webhook URLs (webhooks, webhooks-retry: the
# functions module's webhook_sender_tag) must never reach what the VPC holds. Their URLs
# are checked before each send (no private, loopback, link-local or metadata address,
# after DNS: seatlease/webhooks/urls.py); this is the same rule in the network, should a
# check ever miss: from those functions the VPC's private ranges (Redis, the PSC
# endpoints, the other functions' addresses) are denied, except Cloud SQL's connector
# port on the private services range. Public addresses do not enter the VPC at all
# (VPC_EGRESS_PRIVATE_RANGES_ONLY): they go straight to the internet.
resource "google_compute_firewall" "webhook_senders_to_sql" {
  project     = var.project_id
  name        = "${var.name}-webhook-senders-sql"
  network     = google_compute_network.this.id
  direction   = "EGRESS"
  priority    = 900
  target_tags = [var.webhook_sender_tag]

  allow {
    protocol = "tcp"
    ports    = ["3307"] # the Cloud SQL connector's server-side proxy
  }

  destination_ranges = ["${google_compute_global_address.private_services.address}/${google_compute_global_address.private_services.prefix_length}"]
}

resource "google_compute_firewall" "webhook_senders_deny_private" {
  project     = var.project_id
  name        = "${var.name}-webhook-senders-deny-private"
  network     = google_compute_network.this.id
  direction   = "EGRESS"
  priority    = 1000
  target_tags = [var.webhook_sender_tag]

  deny {
    protocol = "all"
  }

  destination_ranges = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"]

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}

# ---------------------------------------------------------------------------------
# The second region (secondary_region set, modules/stack's two-region mode): the same two
# subnets there, for the functions' Direct VPC egress and for the Private Service Connect
# endpoints of the secondary Redis Cluster. The VPC is global and so is the private
# services access range: Cloud SQL's cross-region replica takes its address from it.
# Nothing here exists without secondary_region.
# ---------------------------------------------------------------------------------

locals {
  secondary_subnet_cidrs = var.secondary_region == null ? {} : {
    functions = local.secondary_functions_subnet_cidr # sizing.tf
    psc       = var.secondary_psc_subnet_cidr
  }
}

resource "google_compute_subnetwork" "secondary" {
  for_each = local.secondary_subnet_cidrs

  project                  = var.project_id
  name                     = "${var.name}-${each.key}-${var.secondary_region}"
  region                   = var.secondary_region
  network                  = google_compute_network.this.id
  ip_cidr_range            = each.value
  private_ip_google_access = true

  log_config {
    aggregation_interval = "INTERVAL_5_MIN"
    flow_sampling        = var.flow_log_sampling
    metadata             = "INCLUDE_ALL_METADATA"
  }
}

# The same wait as functions_subnet_release below, for the second region's functions.
resource "time_sleep" "secondary_functions_subnet_release" {
  count = var.secondary_region == null ? 0 : 1

  destroy_duration = var.functions_subnet_release_wait
  triggers = {
    subnet_id = google_compute_subnetwork.secondary["functions"].id
  }
}

# Direct VPC egress keeps addresses of the functions subnet for a while after the
# functions are deleted: Cloud Run's docs say to wait 1 to 2 hours before deleting such a
# subnet. The functions take the subnet id through this resource's triggers, so on
# destroy it sits between them: the functions go, this waits, then the subnet goes.
resource "time_sleep" "functions_subnet_release" {
  destroy_duration = var.functions_subnet_release_wait
  triggers = {
    subnet_id = google_compute_subnetwork.this["functions"].id
  }
}

