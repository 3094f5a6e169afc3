# seatlease, dev environment: cheap shapes (Basic Redis, zonal 1 vCPU / 3.75 GB Cloud SQL,
# the smallest tier whose 100 connections hold the functions' pools; no PITR), no
# deletion protection so that the stack can be destroyed.
#
# Everything is built and wired in modules/stack. This file only chooses the dev sizes
# (edit them here, where they are reviewed: terraform.tfvars is not in git).

locals {
  environment = "dev"
}

module "seatlease" {
  source = "../../modules/stack"

  project_id  = var.project_id
  region      = var.region
  environment = local.environment
  name        = var.name

  # dev sizes
  redis_tier                 = "BASIC"
  redis_memory_size_gb       = 1
  redis_persistence_enabled  = false
  sql_tier                   = "db-custom-1-3840"
  sql_availability_type      = "ZONAL"
  sql_point_in_time_recovery = false
  sql_backup_retained_count  = 7

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
