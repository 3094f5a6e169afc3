# One Cloud Function (gen2, python312) per entry point of a folder in functions/: the
# function's name with "_" for "-" (source_folder, entry_point below). Each function runs as its own service account that holds only
# what that function needs:
#
#   function   invoked by                      Redis  Cloud SQL  Pub/Sub publish  signing key
#   acquire    anyone (API key in the code)      x        x                        sign
#   heartbeat  anyone (API key in the code)      x        x                        sign
#   release    anyone (API key in the code)      x        x                        sign
#   keys       anyone (public keys, no API key)                                    publish
#   reaper     Cloud Scheduler's SA only         x                    x
#   audit      the audit push subscription'SA              x
#   admin      var.admin_invokers only           x        x
#   portal     anyone (tenant admin key in code)  x        x
#   webhooks   the webhooks push subscription's SA         x                        sign
#   webhooks-retry  Cloud Scheduler's SA only              x                        sign
#
# webhooks (CloudEvent, Pub/Sub push of seat-events) and webhooks-retry (HTTP, Cloud
# Scheduler every minute; also runs the alerts) are two entry points of one folder,
# functions/webhooks/ (source_folder below). They call customers' URLs on the internet:
# VPC_EGRESS_PRIVATE_RANGES_ONLY sends only private ranges into the VPC and everything
# else straight out, and a firewall rule on their network tag (modules/network) refuses
# the VPC's private ranges to them except Cloud SQL (defence behind the code's SSRF
# check). They sign deliveries v1a with the lease-token signing key ("sign") and hold
# WEBHOOK_KEY (webhook_key), which decrypts the endpoints' secrets; admin and portal hold
# it too (they create endpoints and rotate their secrets) but not the signing key.
#
# The signing key (lease tokens, seatlease/api/signingkeys.py): "sign" functions read the
# payload of the one version that signs (secretAccessor) and the versions' metadata;
# "publish" (the JWKS) reads only the metadata and the public halves in the secret's
# annotations (viewer: no payload). No other function can read the secret.
#
# The table and the scaling settings are in their own file (no resources), so that the
# tests can have Terraform evaluate them, and the connection budget (sql_pool.tf) with them.

locals {
  functions = {
    acquire        = { public = true, redis = true, sql = true, publish = false, signing_key = "sign", ingress = "ALLOW_ALL", description = "Acquire a license seat (lease)" }
    heartbeat      = { public = true, redis = true, sql = true, publish = false, signing_key = "sign", ingress = "ALLOW_ALL", description = "Extend a lease" }
    release        = { public = true, redis = true, sql = true, publish = false, signing_key = "sign", ingress = "ALLOW_ALL", description = "Release a lease" }
    keys           = { public = true, redis = false, sql = false, publish = false, signing_key = "publish", ingress = "ALLOW_ALL", description = "Public keys of the lease tokens (JWKS)" }
    reaper         = { public = false, redis = true, sql = false, publish = true, signing_key = "none", ingress = "ALLOW_INTERNAL_ONLY", description = "Reclaim expired leases and drain the event outboxes (Cloud Scheduler, every minute)" }
    audit          = { public = false, redis = false, sql = true, publish = false, signing_key = "none", ingress = "ALLOW_INTERNAL_ONLY", description = "Store lease events in the audit log (CloudEvent, Pub/Sub push)" }
    admin          = { public = false, redis = true, sql = true, publish = false, signing_key = "none", ingress = "ALLOW_ALL", description = "Operator API (IAM-protected)" }
    portal         = { public = true, redis = true, sql = true, publish = false, signing_key = "none", ingress = "ALLOW_ALL", description = "Tenant portal: page and API (tenant admin key in the code)" }
    webhooks       = { public = false, redis = false, sql = true, publish = false, signing_key = "sign", ingress = "ALLOW_INTERNAL_ONLY", description = "Queue lease events for the tenants' webhook endpoints and send what is due (CloudEvent, Pub/Sub push)" }
    webhooks-retry = { public = false, redis = false, sql = true, publish = false, signing_key = "sign", ingress = "ALLOW_INTERNAL_ONLY", description = "Send the webhook deliveries that are due and compute the license alerts (Cloud Scheduler, every minute)" }
  }

  # The functions that hold WEBHOOK_KEY (the key of the endpoints' secrets, Secret Manager).
  webhook_key_functions = toset(["admin", "portal", "webhooks", "webhooks-retry"])

  # A Cloud Function's name allows no "_"; its entry point, a Python name, no "-". Every
  # function's source is the folder of its name, except a folder's second entry point's.
  second_entry_points = { webhooks-retry = "webhooks" } # function => its folder
  source_folder       = { for fn in keys(local.functions) : fn => lookup(local.second_entry_points, fn, fn) }
  entry_point         = { for fn in keys(local.functions) : fn => replace(fn, "-", "_") }
  source_folders      = toset(values(local.source_folder))

  defaults = {
    acquire   = { min_instances = 0, max_instances = 20, concurrency = 80, cpu = "1", memory = "512Mi", timeout_seconds = 30 }
    heartbeat = { min_instances = 0, max_instances = 20, concurrency = 80, cpu = "1", memory = "512Mi", timeout_seconds = 30 }
    release   = { min_instances = 0, max_instances = 10, concurrency = 80, cpu = "1", memory = "512Mi", timeout_seconds = 30 }
    keys      = { min_instances = 0, max_instances = 5, concurrency = 80, cpu = "1", memory = "512Mi", timeout_seconds = 10 }
    reaper    = { min_instances = 0, max_instances = 1, concurrency = 1, cpu = "1", memory = "512Mi", timeout_seconds = 120 }
    audit     = { min_instances = 0, max_instances = 5, concurrency = 10, cpu = "1", memory = "512Mi", timeout_seconds = 60 }
    admin     = { min_instances = 0, max_instances = 2, concurrency = 10, cpu = "1", memory = "512Mi", timeout_seconds = 60 }
    portal    = { min_instances = 0, max_instances = 3, concurrency = 20, cpu = "1", memory = "512Mi", timeout_seconds = 60 }
    # Each push stores its events' deliveries and then sends what is due for a short
    # budget (docs/operations.md, "Webhooks": sizing); the every-minute retry run is one.
    webhooks       = { min_instances = 0, max_instances = 5, concurrency = 10, cpu = "1", memory = "512Mi", timeout_seconds = 60 }
    webhooks-retry = { min_instances = 0, max_instances = 1, concurrency = 1, cpu = "1", memory = "512Mi", timeout_seconds = 120 }
  }

  settings = {
    for fn, d in local.defaults : fn => {
      for k, v in d : k => try(coalesce(lookup(var.function_settings, fn, null)[k], v), v)
    }
  }
}
