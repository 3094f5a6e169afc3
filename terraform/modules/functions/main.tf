# The functions (the table of what each one needs and its scaling are in settings.tf).

locals {
  redis_auth = var.redis_password_secret_id != ""

  common_env = merge(
    {
      GOOGLE_CLOUD_PROJECT = var.project_id
      LOG_LEVEL            = var.log_level
      PUBSUB_TOPIC         = var.pubsub_topic_name
    },
    var.secret_versions != "" ? { SECRET_VERSIONS = var.secret_versions } : {},
  )
  redis_env = merge(
    {
      REDIS_URL     = var.redis_url
      REDIS_CA_CERT = var.redis_ca_cert
    },
    var.redis_cluster ? { REDIS_CLUSTER = "1" } : {},
    var.redis_iam_auth ? { REDIS_IAM_AUTH = "1" } : {},
  )
  sql_env = {
    CLOUD_SQL_INSTANCE = var.cloud_sql_instance
    DB_NAME            = var.db_name
  }
  # The tokens' iss is the functions' base URL, which gen2 functions derive from region and
  # project (https://REGION-PROJECT.cloudfunctions.net/NAME): known before they exist.
  issuer             = "https://${var.region}-${var.project_id}.cloudfunctions.net"
  signing_key_secret = "projects/${var.project_id}/secrets/${var.signing_key_secret_id}"
  signing_env = {
    sign    = { SIGNING_KEY_SECRET = local.signing_key_secret, SEATLEASE_ISSUER = local.issuer }
    publish = { SIGNING_KEY_SECRET = local.signing_key_secret }
    none    = {}
  }

  environment = {
    for fn, f in local.functions : fn => merge(
      local.common_env,
      f.redis ? local.redis_env : {},
      f.sql ? local.sql_env : {},
      f.sql ? { DB_POOL_SIZE = tostring(local.sql_pool_size[fn]), DB_MAX_OVERFLOW = "0", DB_POOL_TIMEOUT = "10" } : {},
      local.signing_env[f.signing_key],
      contains(local.webhook_key_functions, fn) ? { WEBHOOK_RETRY_FIRST_SECONDS = tostring(var.webhook_retry_first_seconds) } : {},
      f.sql ? (var.db_iam_auth
        ? { DB_USER = trimsuffix(google_service_account.function[fn].email, ".gserviceaccount.com"), DB_IAM_AUTH = "1" }
        : { DB_USER = var.db_user }
      ) : {},
    )
  }

  # Secrets each function reads, as environment variable => secret short name.
  secrets = {
    for fn, f in local.functions : fn => merge(
      f.redis && local.redis_auth ? { REDIS_PASSWORD = var.redis_password_secret_id } : {},
      f.sql && !var.db_iam_auth ? { DB_PASSWORD = var.db_password_secret_id } : {},
      contains(local.webhook_key_functions, fn) ? { WEBHOOK_KEY = var.webhook_key_secret_id } : {},
    )
  }

  secret_grants = merge([
    for fn, s in local.secrets : { for env, secret in s : "${fn}/${env}" => { function = fn, secret = secret } }
  ]...)

  sql_functions          = toset([for fn, f in local.functions : fn if f.sql])
  publish_functions      = toset([for fn, f in local.functions : fn if f.publish])
  public_functions       = toset([for fn, f in local.functions : fn if f.public])
  signing_functions      = toset([for fn, f in local.functions : fn if f.signing_key == "sign"])
  key_metadata_functions = toset([for fn, f in local.functions : fn if f.signing_key != "none"])

  admin_invoker_grants = { for m in var.admin_invokers : m => m }

  # Direct VPC egress network tags: every function's, and the webhook senders' own, which
  # the network module's firewall keeps off the VPC's private ranges (Redis) and lets
  # reach Cloud SQL only.
  webhook_sender_functions = toset(["webhooks", "webhooks-retry"])
  network_tags = {
    for fn in keys(local.functions) : fn => contains(local.webhook_sender_functions, fn) ? ["seatlease-functions", "seatlease-webhook-senders"] : ["seatlease-functions"]
  }

  # The second region (secondary_region, modules/stack's two-region mode): the same
  # functions, identities, grants and source objects. Their environment differs only in
  # Redis: each region's functions use their own region's cluster (the second region's
  # is a read-only secondary until `gcloud redis clusters switchover`). CLOUD_SQL_INSTANCE
  # is the instance that takes writes, for both regions (the stack picks it), and the
  # issuer is the same, so that either region re-admits the other's lease tokens.
  secondary_functions = { for fn, f in local.functions : fn => f if var.secondary_region != null }
  secondary_redis_env = merge(
    {
      REDIS_URL     = var.secondary_redis_url
      REDIS_CA_CERT = var.secondary_redis_ca_cert
    },
    var.redis_cluster ? { REDIS_CLUSTER = "1" } : {},
    var.redis_iam_auth ? { REDIS_IAM_AUTH = "1" } : {},
  )
  secondary_environment = {
    for fn, f in local.secondary_functions : fn => merge(local.environment[fn], f.redis ? local.secondary_redis_env : {})
  }
  # Clients reach the second region only through the load balancer: its public functions
  # take no traffic from anywhere else. admin stays callable by its invokers, reaper and
  # audit stay internal.
  # With a second region the first region's public functions are behind the load
  # balancer too: reachable around it, they would serve from (and write to) a region the
  # load balancer no longer sends traffic to, e.g. a region that returns after a failover
  # with its old, stale database. One region: the ingress of the table.
  primary_ingress = {
    for fn, f in local.functions : fn => f.public && var.secondary_region != null ? "ALLOW_INTERNAL_AND_GCLB" : f.ingress
  }
  secondary_ingress = {
    for fn, f in local.secondary_functions : fn => f.public ? "ALLOW_INTERNAL_AND_GCLB" : f.ingress
  }
  secondary_public_functions = toset([for fn in local.public_functions : fn if var.secondary_region != null])
  secondary_admin_grants     = { for m, member in local.admin_invoker_grants : m => member if var.secondary_region != null }
  secondary_sql_functions    = toset([for fn in local.sql_functions : fn if var.secondary_region != null])
}

# --------------------------------------------------------------------------------
# Identities
# --------------------------------------------------------------------------------

resource "google_service_account" "function" {
  for_each = local.functions

  project      = var.project_id
  account_id   = "${var.name}-${each.key}"
  display_name = "seatlease ${each.key} function"
  description  = "Runtime identity of the ${each.key} Cloud Function (${each.value.description})."
}

# Builds the container images of the functions (instead of the default Compute or
# Cloud Build service account, which hold far more than this).
resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name}-build"
  display_name = "seatlease function builds"
  description  = "Cloud Build identity for the seatlease function builds."
}

# What the build service account needs, as Cloud Run's "Configure the build service
# account" page lists it for functions deployed from source (Cloud Run functions docs,
# run/docs/configuring/services/build-service-account): Logs Writer (build logs),
# Artifact Registry Writer (the built image) and Storage Object Admin ("for retrieving
# the function source from the Cloud Storage bucket"). Gen2 copies the uploaded source
# to its own bucket gcf-v2-sources-PROJECT_NUMBER-REGION (-CMEK_HASH with CMEK), which
# the build reads. Storage Object Admin is therefore granted on the project, but an IAM
# condition limits it to that bucket and to this module's source bucket: nothing else
# in the project (e.g. the Terraform state bucket) becomes readable to builds.
resource "google_project_iam_member" "build" {
  for_each = toset([
    "roles/logging.logWriter",
    "roles/artifactregistry.writer",
  ])

  project = var.project_id
  role    = each.value
  member  = "serviceAccount:${google_service_account.build.email}"
}

data "google_project" "this" {
  project_id = var.project_id
}

locals {
  gcf_sources_bucket = "gcf-v2-sources-${data.google_project.this.number}-${var.region}"

  # Every function's Cloud Run service (named after the function) by region, with its
  # deterministic URL (https://SERVICE-PROJECT_NUMBER.REGION.run.app), known before the
  # services exist and without reading them (outputs.tf says why).
  run_services = {
    for region in compact([var.region, var.secondary_region]) : region => {
      for fn in keys(local.functions) : fn => "https://${fn}-${data.google_project.this.number}.${region}.run.app"
    }
  }
}

resource "google_project_iam_member" "build_sources" {
  project = var.project_id
  role    = "roles/storage.objectAdmin"
  member  = "serviceAccount:${google_service_account.build.email}"

  condition {
    title       = "seatlease-function-source-buckets"
    description = "The Cloud Functions gen2 source bucket of this region and the seatlease source bucket only."
    expression  = "resource.name.startsWith(\"projects/_/buckets/${local.gcf_sources_bucket}\") || resource.name == \"projects/_/buckets/${google_storage_bucket.sources.name}\" || resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.sources.name}/\")"
  }
}

# The second region's builds read that region's gen2 source bucket.
resource "google_project_iam_member" "build_sources_secondary" {
  count = var.secondary_region == null ? 0 : 1

  project = var.project_id
  role    = "roles/storage.objectAdmin"
  member  = "serviceAccount:${google_service_account.build.email}"

  condition {
    title       = "seatlease-function-source-bucket-secondary"
    description = "The Cloud Functions gen2 source bucket of the second region only."
    expression  = "resource.name.startsWith(\"projects/_/buckets/gcf-v2-sources-${data.google_project.this.number}-${var.secondary_region}\")"
  }
}

# The identity Cloud Scheduler invokes the reaper as (modules/scheduler: the job's OIDC
# token). It lives here, with the reaper's run.invoker grants below, so that each grant
# names its function resource: on a first apply Terraform creates the grant only after
# the Cloud Run service exists (an IAM call on a service that does not exist yet fails).
resource "google_service_account" "scheduler" {
  project      = var.project_id
  account_id   = "${var.name}-scheduler"
  display_name = "seatlease reaper scheduler"
  description  = "Identity Cloud Scheduler uses to invoke the reaper and webhooks-retry functions."
}

# Pushes lease events to the audit function (OIDC token in every push).
resource "google_service_account" "audit_push" {
  project      = var.project_id
  account_id   = "${var.name}-audit-push"
  display_name = "seatlease audit push"
  description  = "Identity of the Pub/Sub push subscription that invokes the audit function."
}

# The Pub/Sub service agent signs the OIDC tokens of the push subscription as this SA.
resource "google_service_account_iam_member" "audit_push_token_creator" {
  service_account_id = google_service_account.audit_push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:${var.pubsub_service_agent_email}"
}

# Pushes lease events to the webhooks function: its own identity, so that the audit
# push's may invoke the audit function only and this one the webhooks function only.
resource "google_service_account" "webhooks_push" {
  project      = var.project_id
  account_id   = "${var.name}-webhooks-push"
  display_name = "seatlease webhooks push"
  description  = "Identity of the Pub/Sub push subscription that invokes the webhooks function."
}

resource "google_service_account_iam_member" "webhooks_push_token_creator" {
  service_account_id = google_service_account.webhooks_push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:${var.pubsub_service_agent_email}"
}

# --------------------------------------------------------------------------------
# Least-privilege grants
# --------------------------------------------------------------------------------

resource "google_secret_manager_secret_iam_member" "function" {
  for_each = local.secret_grants

  project   = var.project_id
  secret_id = each.value.secret
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.function[each.value.function].email}"
}

# The lease-token signing key (see the table above): the payload for the signers only,
# the versions and annotations (public keys, start times) for them and the JWKS.
resource "google_secret_manager_secret_iam_member" "signing_key_accessor" {
  for_each = local.signing_functions

  project   = var.project_id
  secret_id = var.signing_key_secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.function[each.key].email}"
}

resource "google_secret_manager_secret_iam_member" "signing_key_viewer" {
  for_each = local.key_metadata_functions

  project   = var.project_id
  secret_id = var.signing_key_secret_id
  role      = "roles/secretmanager.viewer"
  member    = "serviceAccount:${google_service_account.function[each.key].email}"
}

# Cloud SQL Python Connector: cloudsql.client, limited to this instance by a condition.
resource "google_project_iam_member" "sql_client" {
  for_each = local.sql_functions

  project = var.project_id
  role    = "roles/cloudsql.client"
  member  = "serviceAccount:${google_service_account.function[each.key].email}"

  condition {
    title      = "seatlease-sql-instance-only"
    expression = "resource.name == \"projects/${var.project_id}/instances/${var.sql_instance_name}\" && resource.service == \"sqladmin.googleapis.com\""
  }
}

# Redis Cluster IAM authentication: the functions that use Redis may connect to the
# project's clusters (both regions' with two regions: the same service accounts).
resource "google_project_iam_member" "redis_connection_user" {
  for_each = var.redis_iam_auth ? toset([for fn, f in local.functions : fn if f.redis]) : toset([])

  project = var.project_id
  role    = "roles/redis.dbConnectionUser"
  member  = "serviceAccount:${google_service_account.function[each.key].email}"
}

resource "google_project_iam_member" "sql_instance_user" {
  for_each = var.db_iam_auth ? local.sql_functions : toset([])

  project = var.project_id
  role    = "roles/cloudsql.instanceUser"
  member  = "serviceAccount:${google_service_account.function[each.key].email}"

  condition {
    title      = "seatlease-sql-instance-only"
    expression = "resource.name == \"projects/${var.project_id}/instances/${var.sql_instance_name}\" && resource.service == \"sqladmin.googleapis.com\""
  }
}

# Two regions: the same grants on the cross-region replica, which takes the writes once
# promoted (the IAM database users are PostgreSQL roles: the replica has them).
resource "google_project_iam_member" "sql_client_replica" {
  for_each = local.secondary_sql_functions

  project = var.project_id
  role    = "roles/cloudsql.client"
  member  = "serviceAccount:${google_service_account.function[each.key].email}"

  condition {
    title      = "seatlease-sql-replica-only"
    expression = "resource.name == \"projects/${var.project_id}/instances/${var.sql_replica_instance_name}\" && resource.service == \"sqladmin.googleapis.com\""
  }
}

resource "google_project_iam_member" "sql_instance_user_replica" {
  for_each = var.db_iam_auth ? local.secondary_sql_functions : toset([])

  project = var.project_id
  role    = "roles/cloudsql.instanceUser"
  member  = "serviceAccount:${google_service_account.function[each.key].email}"

  condition {
    title      = "seatlease-sql-replica-only"
    expression = "resource.name == \"projects/${var.project_id}/instances/${var.sql_replica_instance_name}\" && resource.service == \"sqladmin.googleapis.com\""
  }
}

resource "google_sql_user" "iam" {
  for_each = var.db_iam_auth ? local.sql_functions : toset([])

  project  = var.project_id
  instance = var.sql_instance_name
  name     = trimsuffix(google_service_account.function[each.key].email, ".gserviceaccount.com")
  type     = "CLOUD_IAM_SERVICE_ACCOUNT"

  # The GRANTs these users hold (terraform/README.md) make PostgreSQL refuse DROP ROLE;
  # the instance's own deletion removes them.
  deletion_policy = "ABANDON"
}

resource "google_pubsub_topic_iam_member" "publisher" {
  for_each = local.publish_functions

  project = var.project_id
  topic   = var.pubsub_topic_name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${google_service_account.function[each.key].email}"
}

# --------------------------------------------------------------------------------
# Source archives: tools/build_function_source.py builds functions/NAME/main.py + the
# seatlease runtime package (shared/seatlease/; never the CLI, client or local stack) +
# requirements.txt (the hashed lock requirements-functions.txt for the functions that
# publish, requirements-functions-nopubsub.txt for the others; a missing or stale lock
# fails the plan) into a deterministic zip at plan time; the object name carries its
# sha256, so a function is rebuilt exactly when its source or locked dependencies change.
# --------------------------------------------------------------------------------

# One archive per folder: webhooks and webhooks-retry run the same one.
data "external" "source" {
  for_each = local.source_folders

  program = [var.python, "${var.repo_root}/tools/build_function_source.py", "--terraform-external"]
  query = {
    name      = each.key
    outdir    = var.build_dir
    repo_root = var.repo_root
  }
}

# A multi-region bucket (EU, US or ASIA by the first region's continent, or
# source_bucket_location): a build in the second region, which an environment-only update
# of a gen2 function can start, must not read its source from the region that was lost.
# The location is part of the name: a bucket cannot move, so another location is another
# bucket (terraform/README.md, "Two regions", says how an existing stack moves over).
locals {
  multi_regions          = { europe = "EU", us = "US", northamerica = "US", asia = "ASIA" }
  source_bucket_location = upper(coalesce(var.source_bucket_location, lookup(local.multi_regions, split("-", var.region)[0], "US")))
}

resource "google_storage_bucket" "sources" {
  #checkov:skip=CKV_GCP_62:Holds only build inputs (function zips); reads are by Cloud Build and audited by Cloud Audit Logs, a second access-log bucket adds nothing.
  project                     = var.project_id
  name                        = "${var.project_id}-${var.name}-fn-${lower(local.source_bucket_location)}"
  location                    = local.source_bucket_location
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  # A dev stack's destroy empties the bucket; prod keeps it (and its versions) unless
  # deletion protection is turned off first.
  force_destroy = var.source_bucket_force_destroy
  labels        = var.labels

  versioning {
    enabled = true
  }

  # Objects are named by the sha256 of their archive: a changed archive is a new object
  # and Terraform deletes the old one, which versioning keeps as a noncurrent version.
  # Only those age out; the live objects the functions were built from stay (an age
  # rule on them would delete them under the running functions and make the next plan
  # upload them again).
  lifecycle_rule {
    condition {
      with_state                 = "ARCHIVED"
      days_since_noncurrent_time = var.source_noncurrent_days
    }
    action {
      type = "Delete"
    }
  }
}

resource "google_storage_bucket_object" "source" {
  for_each = local.source_folders

  bucket = google_storage_bucket.sources.name
  name   = "${each.key}/${data.external.source[each.key].result.sha256}.zip"
  # Relative to the root module (build_dir is), so the same archive from another
  # checkout is the same object: source forces a new object when its string changes.
  source = data.external.source[each.key].result.path
}

# --------------------------------------------------------------------------------
# Functions
# --------------------------------------------------------------------------------

resource "google_cloudfunctions2_function" "this" {
  #checkov:skip=CKV_GCP_124:acquire/heartbeat/release are the public client API (API-key auth in the code), portal is the tenants' page and API (tenant admin key in the code) and admin is called by operators from outside Google Cloud (IAM-protected); reaper, audit, webhooks and webhooks-retry are ALLOW_INTERNAL_ONLY.
  for_each = local.functions

  project     = var.project_id
  location    = var.region
  name        = each.key
  description = each.value.description
  labels      = merge(var.labels, { function = each.key })

  build_config {
    runtime         = "python312"
    entry_point     = local.entry_point[each.key]
    service_account = google_service_account.build.id

    source {
      storage_source {
        bucket = google_storage_bucket.sources.name
        object = google_storage_bucket_object.source[local.source_folder[each.key]].name
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.function[each.key].email
    ingress_settings                 = local.primary_ingress[each.key]
    all_traffic_on_latest_revision   = true
    min_instance_count               = local.settings[each.key].min_instances
    max_instance_count               = local.settings[each.key].max_instances
    max_instance_request_concurrency = local.settings[each.key].concurrency
    available_cpu                    = local.settings[each.key].cpu
    available_memory                 = local.settings[each.key].memory
    timeout_seconds                  = local.settings[each.key].timeout_seconds

    environment_variables = local.environment[each.key]

    dynamic "secret_environment_variables" {
      for_each = local.secrets[each.key]
      content {
        key        = secret_environment_variables.key
        project_id = var.project_id
        secret     = secret_environment_variables.value
        version    = "latest"
      }
    }

    # Direct VPC egress (no Serverless VPC Access connector): private ranges (Redis,
    # Cloud SQL private IP) go through the VPC, Google APIs stay on Google's network.
    direct_vpc_network_interface {
      network    = var.network_id
      subnetwork = var.subnet_id
      tags       = local.network_tags[each.key]
    }
    direct_vpc_egress = "VPC_EGRESS_PRIVATE_RANGES_ONLY"
  }

  depends_on = [
    google_secret_manager_secret_iam_member.function,
    google_secret_manager_secret_iam_member.signing_key_accessor,
    google_secret_manager_secret_iam_member.signing_key_viewer,
    google_project_iam_member.sql_client,
    google_project_iam_member.redis_connection_user,
    google_project_iam_member.build,
    google_project_iam_member.build_sources,
  ]
}

# The second region's functions: the resource above with the second region's location,
# subnet, environment (its Redis) and ingress. Everything else is the same on purpose
# (tests/terraform/test_two_regions.py compares the two blocks).
resource "google_cloudfunctions2_function" "secondary" {
  #checkov:skip=CKV_GCP_124:acquire/heartbeat/release/keys/portal are ALLOW_INTERNAL_AND_GCLB here (the load balancer only); admin is called by operators from outside Google Cloud (IAM-protected); reaper, audit, webhooks and webhooks-retry are ALLOW_INTERNAL_ONLY.
  for_each = local.secondary_functions

  project     = var.project_id
  location    = var.secondary_region
  name        = each.key
  description = each.value.description
  labels      = merge(var.labels, { function = each.key })

  build_config {
    runtime         = "python312"
    entry_point     = local.entry_point[each.key]
    service_account = google_service_account.build.id

    source {
      storage_source {
        bucket = google_storage_bucket.sources.name
        object = google_storage_bucket_object.source[local.source_folder[each.key]].name
      }
    }
  }

  service_config {
    service_account_email            = google_service_account.function[each.key].email
    ingress_settings                 = local.secondary_ingress[each.key]
    all_traffic_on_latest_revision   = true
    min_instance_count               = local.settings[each.key].min_instances
    max_instance_count               = local.settings[each.key].max_instances
    max_instance_request_concurrency = local.settings[each.key].concurrency
    available_cpu                    = local.settings[each.key].cpu
    available_memory                 = local.settings[each.key].memory
    timeout_seconds                  = local.settings[each.key].timeout_seconds

    environment_variables = local.secondary_environment[each.key]

    dynamic "secret_environment_variables" {
      for_each = local.secrets[each.key]
      content {
        key        = secret_environment_variables.key
        project_id = var.project_id
        secret     = secret_environment_variables.value
        version    = "latest"
      }
    }

    direct_vpc_network_interface {
      network    = var.network_id
      subnetwork = var.secondary_subnet_id
      tags       = local.network_tags[each.key]
    }
    direct_vpc_egress = "VPC_EGRESS_PRIVATE_RANGES_ONLY"
  }

  depends_on = [
    google_secret_manager_secret_iam_member.function,
    google_secret_manager_secret_iam_member.signing_key_accessor,
    google_secret_manager_secret_iam_member.signing_key_viewer,
    google_project_iam_member.sql_client,
    google_project_iam_member.sql_client_replica,
    google_project_iam_member.redis_connection_user,
    google_project_iam_member.build,
    google_project_iam_member.build_sources,
    google_project_iam_member.build_sources_secondary,
  ]
}

# --------------------------------------------------------------------------------
# Who may invoke what (roles/run.invoker on the underlying Cloud Run service)
# --------------------------------------------------------------------------------

# acquire / heartbeat / release: public at the network and IAM level; every request is
# authenticated by the API key (Authorization: Bearer) inside the function. keys: public,
# it serves only public keys.
resource "google_cloud_run_v2_service_iam_member" "public" {
  for_each = local.public_functions

  # The client API is public by design: clients authenticate with per-tenant API keys checked in the function.
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this[each.key].name
  role     = "roles/run.invoker"
  member   = "allUsers"
}

resource "google_cloud_run_v2_service_iam_member" "admin" {
  for_each = local.admin_invoker_grants

  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this["admin"].name
  role     = "roles/run.invoker"
  member   = each.value
}

resource "google_cloud_run_v2_service_iam_member" "audit_push" {
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this["audit"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.audit_push.email}"
}

resource "google_cloud_run_v2_service_iam_member" "webhooks_push" {
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this["webhooks"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.webhooks_push.email}"
}

resource "google_cloud_run_v2_service_iam_member" "webhooks_push_secondary" {
  count = var.secondary_region == null ? 0 : 1

  project  = var.project_id
  location = var.secondary_region
  name     = google_cloudfunctions2_function.secondary["webhooks"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.webhooks_push.email}"
}

# The second region: the same invokers on its services. The load balancer's serverless
# requests carry no identity, so the public functions stay allUsers there too (their
# ingress admits the load balancer only).
resource "google_cloud_run_v2_service_iam_member" "public_secondary" {
  for_each = local.secondary_public_functions

  project  = var.project_id
  location = var.secondary_region
  name     = google_cloudfunctions2_function.secondary[each.key].name
  role     = "roles/run.invoker"
  member   = "allUsers"
}

resource "google_cloud_run_v2_service_iam_member" "admin_secondary" {
  for_each = local.secondary_admin_grants

  project  = var.project_id
  location = var.secondary_region
  name     = google_cloudfunctions2_function.secondary["admin"].name
  role     = "roles/run.invoker"
  member   = each.value
}

resource "google_cloud_run_v2_service_iam_member" "audit_push_secondary" {
  count = var.secondary_region == null ? 0 : 1

  project  = var.project_id
  location = var.secondary_region
  name     = google_cloudfunctions2_function.secondary["audit"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.audit_push.email}"
}

# The scheduler's service account is the only invoker of the reaper, in each region:
# the job runs in the serving region only (modules/scheduler), and with both regions'
# grants in place a failover moves the job and needs no new grant (docs/operations.md).
resource "google_cloud_run_v2_service_iam_member" "reaper_invoker" {
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this["reaper"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.scheduler.email}"
}

resource "google_cloud_run_v2_service_iam_member" "reaper_invoker_secondary" {
  count = var.secondary_region == null ? 0 : 1

  project  = var.project_id
  location = var.secondary_region
  name     = google_cloudfunctions2_function.secondary["reaper"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.scheduler.email}"
}

# The scheduler's service account also runs the webhook retries and the alerts every
# minute (modules/scheduler's webhooks_retry job), in the serving region, like the reaper.
resource "google_cloud_run_v2_service_iam_member" "webhooks_retry_invoker" {
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this["webhooks-retry"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.scheduler.email}"
}

resource "google_cloud_run_v2_service_iam_member" "webhooks_retry_invoker_secondary" {
  count = var.secondary_region == null ? 0 : 1

  project  = var.project_id
  location = var.secondary_region
  name     = google_cloudfunctions2_function.secondary["webhooks-retry"].name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.scheduler.email}"
}
