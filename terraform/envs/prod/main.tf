# seatlease, prod environment: Standard-tier (replicated) Redis with RDB snapshots (a
# Redis Cluster: dedicated-core nodes with AOF persistence),
# regional Cloud SQL with backups and point-in-time recovery, deletion protection on.
#
# Everything is built and wired in modules/stack. This file only chooses the prod sizes
# (edit them here, where they are reviewed: terraform.tfvars is not in git).

locals {
  environment = "prod"
}

module "seatlease" {
  source = "../../modules/stack"

  project_id  = var.project_id
  region      = var.region
  environment = local.environment
  name        = var.name

  # prod sizes
  redis_tier                 = "STANDARD_HA"
  redis_memory_size_gb       = 5
  redis_persistence_enabled  = true
  redis_cluster_node_type    = var.redis_cluster_node_type
  redis_cluster_shard_count  = var.redis_cluster_shard_count
  redis_iam_auth             = var.redis_iam_auth
  sql_tier                   = "db-custom-2-7680"
  sql_availability_type      = "REGIONAL"
  sql_point_in_time_recovery = true
  sql_backup_retained_count  = 30

  # operator settings (variables.tf, set in terraform.tfvars)
  enable_apis           = var.enable_apis
  use_redis_cluster     = var.use_redis_cluster
  deletion_protection   = var.deletion_protection
  db_password_version   = var.db_password_version
  db_iam_auth           = var.db_iam_auth
  admin_invokers        = var.admin_invokers
  notification_channels = var.notification_channels
  function_settings     = var.function_settings
  log_level             = var.log_level
  python                = var.python

  # two regions (terraform/README.md, "Two regions")
  secondary_region     = var.secondary_region
  serving_region       = var.serving_region
  sql_replica_promoted = var.sql_replica_promoted
  lb_domains           = var.lb_domains
  lb_ssl_certificates  = var.lb_ssl_certificates
}
