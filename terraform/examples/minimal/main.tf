# The smallest complete seatlease deployment: one project, dev sizes, local state, no
# deletion protection. Copy this directory to start your own root module; for a
# shared, long-lived environment use envs/dev or envs/prod (GCS state, reviewed sizes).

module "seatlease" {
  source = "../../modules/stack"

  project_id  = var.project_id
  region      = var.region
  environment = "example"
  name        = var.name

  redis_tier                 = "BASIC"
  redis_memory_size_gb       = 1
  redis_persistence_enabled  = false
  sql_tier                   = "db-custom-1-3840"
  sql_availability_type      = "ZONAL"
  sql_point_in_time_recovery = false
  sql_backup_retained_count  = 7

  # Throw-away: `terraform destroy` may delete Cloud SQL, Redis and the source bucket.
  deletion_protection = false
  admin_invokers      = var.admin_invokers
}
