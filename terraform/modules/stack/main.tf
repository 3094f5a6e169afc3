# The whole seatlease service in one project: the APIs it needs, then network, Redis,
# secrets, Cloud SQL, the functions, Pub/Sub, the reaper's scheduler and monitoring,
# wired together. envs/dev and envs/prod are thin roots that call this module with
# their sizes; nothing here depends on which environment calls it.

locals {
  repo_root = abspath("${path.module}/../../..")
  # envs/<env>/.build, one per root, relative: the archive paths are part of the source
  # objects, and an absolute one would replace them all from another checkout.
  build_dir = "${path.root}/.build"
  labels    = { app = "seatlease", env = var.environment }

  # Two regions (secondary_region): which one serves, and the names of the second
  # region's Redis Cluster and Cloud SQL replica (NAME-REGION: role-free, they keep their
  # names when they become the primaries).
  two_regions      = var.secondary_region != null
  serving_region   = coalesce(var.serving_region, var.region)
  serves_secondary = local.two_regions && local.serving_region == var.secondary_region
  secondary_name   = "${var.name}-${coalesce(var.secondary_region, "none")}"

  apis = [
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com",
    "compute.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "networkconnectivity.googleapis.com",
    "pubsub.googleapis.com",
    "redis.googleapis.com",
    "run.googleapis.com",
    "secretmanager.googleapis.com",
    "servicenetworking.googleapis.com",
    "sqladmin.googleapis.com",
  ]
}

resource "google_project_service" "apis" {
  for_each = var.enable_apis ? toset(local.apis) : toset([])

  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}

# Every module waits for the APIs (depends_on below), and then for this: an API that was
# just enabled can still answer "API has not been used in project ... or it is
# disabled" for a short while, and its service agents (Pub/Sub's, which mints the push
# OIDC tokens and forwards dead letters) are created in the background. The wait runs
# again only when an API is added to the list; with enable_apis = false it is skipped.
resource "time_sleep" "apis_propagated" {
  count = var.enable_apis ? 1 : 0

  create_duration = var.api_propagation_wait
  triggers        = { for api, s in google_project_service.apis : api => s.id }
}

module "network" {
  source = "../network"

  project_id = var.project_id
  region     = var.region
  name       = var.name

  # Known at plan time (the functions' settings, not their resources): the Direct VPC
  # egress subnet is sized for every function at its maximum instance count.
  functions_max_instances = module.functions.max_instance_counts
  functions_subnet_cidr   = var.functions_subnet_cidr
  webhook_sender_tag      = module.functions.webhook_sender_tag

  secondary_region                = var.secondary_region
  secondary_functions_subnet_cidr = var.secondary_functions_subnet_cidr

  depends_on = [google_project_service.apis, time_sleep.apis_propagated]
}

module "redis" {
  source = "../redis"

  project_id                  = var.project_id
  region                      = var.region
  name                        = var.name
  network_id                  = module.network.network_id
  private_services_range_name = module.network.private_services_range_name
  private_services_connection = module.network.private_services_connection
  psc_subnet_id               = module.network.psc_subnet_id
  use_cluster                 = var.use_redis_cluster
  tier                        = var.redis_tier
  memory_size_gb              = var.redis_memory_size_gb
  persistence_enabled         = var.redis_persistence_enabled
  cluster_node_type           = var.redis_cluster_node_type
  cluster_shard_count         = var.redis_cluster_shard_count
  iam_auth                    = var.use_redis_cluster && var.redis_iam_auth
  deletion_protection         = var.deletion_protection
  labels                      = local.labels

  depends_on = [google_project_service.apis, time_sleep.apis_propagated]
}

# The second region's Redis Cluster: a secondary of the first (cross-region replication,
# read-only until `gcloud redis clusters switchover`), the same shape, reached through
# Private Service Connect in that region.
module "redis_secondary" {
  source = "../redis"
  count  = local.two_regions ? 1 : 0

  project_id                  = var.project_id
  region                      = var.secondary_region
  name                        = local.secondary_name
  network_id                  = module.network.network_id
  private_services_range_name = module.network.private_services_range_name
  private_services_connection = module.network.private_services_connection
  psc_subnet_id               = module.network.secondary_psc_subnet_id
  use_cluster                 = var.use_redis_cluster
  primary_cluster_id          = module.redis.instance_id
  persistence_enabled         = var.redis_persistence_enabled
  cluster_node_type           = var.redis_cluster_node_type
  cluster_shard_count         = var.redis_cluster_shard_count
  iam_auth                    = var.use_redis_cluster && var.redis_iam_auth
  deletion_protection         = var.deletion_protection
  labels                      = local.labels

  depends_on = [google_project_service.apis, time_sleep.apis_propagated]
}

module "secrets" {
  source = "../secrets"

  project_id          = var.project_id
  name                = var.name
  replica_locations   = local.two_regions ? [var.region, var.secondary_region] : [var.region]
  redis_auth_enabled  = module.redis.auth_enabled
  redis_auth_string   = module.redis.auth_string
  db_password_version = var.db_password_version
  labels              = local.labels

  depends_on = [google_project_service.apis, time_sleep.apis_propagated]
}

module "database" {
  source = "../database"

  project_id                     = var.project_id
  region                         = var.region
  name                           = var.name
  network_id                     = module.network.network_id
  private_services_range_name    = module.network.private_services_range_name
  private_services_connection    = module.network.private_services_connection
  tier                           = var.sql_tier
  max_connections                = var.sql_max_connections
  availability_type              = var.sql_availability_type
  backups_enabled                = true # in every environment; PITR is the choice
  point_in_time_recovery_enabled = var.sql_point_in_time_recovery
  backup_retained_count          = var.sql_backup_retained_count
  deletion_protection            = var.deletion_protection
  db_password                    = module.secrets.db_password
  db_password_version            = var.db_password_version
  labels                         = local.labels

  replica_region   = var.secondary_region
  replica_name     = local.two_regions ? local.secondary_name : null
  replica_promoted = var.sql_replica_promoted

  depends_on = [google_project_service.apis, time_sleep.apis_propagated]
}

module "functions" {
  source = "../functions"

  project_id                 = var.project_id
  region                     = var.region
  name                       = var.name
  repo_root                  = local.repo_root
  build_dir                  = local.build_dir
  python                     = var.python
  network_id                 = module.network.network_id
  subnet_id                  = module.network.functions_subnet_id
  redis_url                  = module.redis.redis_url
  redis_ca_cert              = module.redis.ca_cert
  redis_cluster              = module.redis.is_cluster
  redis_iam_auth             = var.use_redis_cluster && var.redis_iam_auth
  redis_password_secret_id   = module.secrets.redis_password_secret_id
  cloud_sql_instance         = var.sql_replica_promoted ? module.database.replica_connection_name : module.database.connection_name
  sql_instance_name          = module.database.instance_name
  db_name                    = module.database.db_name
  db_user                    = module.database.db_user
  db_password_secret_id      = module.secrets.db_password_secret_id
  signing_key_secret_id      = module.secrets.signing_key_secret_id
  webhook_key_secret_id      = module.secrets.webhook_key_secret_id
  secret_versions            = module.secrets.secret_versions
  db_iam_auth                = var.db_iam_auth
  sql_max_connections        = module.database.max_connections
  pubsub_topic_name          = module.pubsub.topic_name
  pubsub_service_agent_email = module.pubsub.pubsub_service_agent_email
  log_level                  = var.log_level
  function_settings          = var.function_settings
  admin_invokers             = var.admin_invokers
  labels                     = local.labels

  source_bucket_force_destroy = !var.deletion_protection

  # Two regions: the same functions in the second region, on its own Redis Cluster.
  secondary_region          = var.secondary_region
  secondary_subnet_id       = local.two_regions ? module.network.secondary_functions_subnet_id : null
  secondary_redis_url       = local.two_regions ? module.redis_secondary[0].redis_url : null
  secondary_redis_ca_cert   = local.two_regions ? module.redis_secondary[0].ca_cert : null
  sql_replica_instance_name = local.two_regions ? module.database.replica_instance_name : null

  depends_on = [google_project_service.apis, time_sleep.apis_propagated]
}

# The push subscription only calls the audit function's URI (known from the function
# table): it needs no ordering after the function. The grant that does, run.invoker for
# its service account, is in modules/functions on the function resource.
module "pubsub" {
  source = "../pubsub"

  project_id                       = var.project_id
  audit_push_endpoint              = local.serves_secondary ? module.functions.secondary_service_uris["audit"] : module.functions.service_uris["audit"]
  audit_push_service_account_email = module.functions.audit_push_service_account_email
  # The webhooks function, in the serving region like the audit push.
  webhooks_push_endpoint              = local.serves_secondary ? module.functions.secondary_service_uris["webhooks"] : module.functions.service_uris["webhooks"]
  webhooks_push_service_account_email = module.functions.webhooks_push_service_account_email
  labels                              = local.labels

  depends_on = [google_project_service.apis, time_sleep.apis_propagated]
}

# The reaper runs in the serving region only (one job: two would sweep the same leases
# twice, and the one in a lost region cannot reach its Redis).
module "scheduler" {
  source = "../scheduler"

  project_id            = var.project_id
  region                = local.serving_region
  name                  = var.name
  reaper_uri            = local.serves_secondary ? module.functions.secondary_service_uris["reaper"] : module.functions.service_uris["reaper"]
  service_account_email = module.functions.scheduler_service_account_email
  webhooks_retry_uri    = local.serves_secondary ? module.functions.secondary_service_uris["webhooks-retry"] : module.functions.service_uris["webhooks-retry"]

  depends_on = [google_project_service.apis, time_sleep.apis_propagated]
}

# The scheduler's service account and its grant on the first region's reaper were in the
# scheduler module; they are the same objects, now next to the reaper function.
moved {
  from = module.scheduler.google_service_account.scheduler
  to   = module.functions.google_service_account.scheduler
}

moved {
  from = module.scheduler.google_cloud_run_v2_service_iam_member.reaper_invoker
  to   = module.functions.google_cloud_run_v2_service_iam_member.reaper_invoker
}

module "monitoring" {
  source = "../monitoring"

  project_id                             = var.project_id
  name                                   = var.name
  notification_channels                  = var.notification_channels
  dead_letter_subscription_name          = module.pubsub.dead_letter_subscription_name
  webhooks_subscription_name             = module.pubsub.webhooks_subscription_name
  webhooks_dead_letter_subscription_name = module.pubsub.webhooks_dead_letter_subscription_name
  redis_is_cluster                       = module.redis.is_cluster
  redis_instance_id                      = module.redis.instance_id

  depends_on = [google_project_service.apis, time_sleep.apis_propagated]
}

# Two regions: the client-facing functions behind one global external Application Load
# Balancer (the loadbalancer module says which path goes where, and why acquire,
# heartbeat, release and portal are served from serving_region only).
module "loadbalancer" {
  source = "../loadbalancer"
  count  = local.two_regions ? 1 : 0

  project_id = var.project_id
  name       = var.name
  service_names = {
    (var.region)           = module.functions.service_names
    (var.secondary_region) = module.functions.secondary_service_names
  }
  serving_region        = local.serving_region
  domains               = var.lb_domains
  ssl_certificates      = var.lb_ssl_certificates
  notification_channels = var.notification_channels
  labels                = local.labels

  depends_on = [google_project_service.apis, time_sleep.apis_propagated]
}
