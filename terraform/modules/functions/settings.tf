# One Cloud Function (gen2, python312) per folder in functions/. The entry point of each
# is the folder name. Each function runs as its own service account that holds only
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
    acquire   = { public = true, redis = true, sql = true, publish = false, signing_key = "sign", ingress = "ALLOW_ALL", description = "Acquire a license seat (lease)" }
    heartbeat = { public = true, redis = true, sql = true, publish = false, signing_key = "sign", ingress = "ALLOW_ALL", description = "Extend a lease" }
    release   = { public = true, redis = true, sql = true, publish = false, signing_key = "sign", ingress = "ALLOW_ALL", description = "Release a lease" }
    keys      = { public = true, redis = false, sql = false, publish = false, signing_key = "publish", ingress = "ALLOW_ALL", description = "Public keys of the lease tokens (JWKS)" }
    reaper    = { public = false, redis = true, sql = false, publish = true, signing_key = "none", ingress = "ALLOW_INTERNAL_ONLY", description = "Reclaim expired leases and drain the event outboxes (Cloud Scheduler, every minute)" }
    audit     = { public = false, redis = false, sql = true, publish = false, signing_key = "none", ingress = "ALLOW_INTERNAL_ONLY", description = "Store lease events in the audit log (CloudEvent, Pub/Sub push)" }
    admin     = { public = false, redis = true, sql = true, publish = false, signing_key = "none", ingress = "ALLOW_ALL", description = "Operator API (IAM-protected)" }
    portal    = { public = true, redis = true, sql = true, publish = false, signing_key = "none", ingress = "ALLOW_ALL", description = "Tenant portal: page and API (tenant admin key in the code)" }
  }

  defaults = {
    acquire   = { min_instances = 0, max_instances = 20, concurrency = 80, cpu = "1", memory = "512Mi", timeout_seconds = 30 }
    heartbeat = { min_instances = 0, max_instances = 20, concurrency = 80, cpu = "1", memory = "512Mi", timeout_seconds = 30 }
    release   = { min_instances = 0, max_instances = 10, concurrency = 80, cpu = "1", memory = "512Mi", timeout_seconds = 30 }
    keys      = { min_instances = 0, max_instances = 5, concurrency = 80, cpu = "1", memory = "512Mi", timeout_seconds = 10 }
    reaper    = { min_instances = 0, max_instances = 1, concurrency = 1, cpu = "1", memory = "512Mi", timeout_seconds = 120 }
    audit     = { min_instances = 0, max_instances = 5, concurrency = 10, cpu = "1", memory = "512Mi", timeout_seconds = 60 }
    admin     = { min_instances = 0, max_instances = 2, concurrency = 10, cpu = "1", memory = "512Mi", timeout_seconds = 60 }
    portal    = { min_instances = 0, max_instances = 3, concurrency = 20, cpu = "1", memory = "512Mi", timeout_seconds = 60 }
  }

  settings = {
    for fn, d in local.defaults : fn => {
      for k, v in d : k => try(coalesce(lookup(var.function_settings, fn, null)[k], v), v)
    }
  }
}
