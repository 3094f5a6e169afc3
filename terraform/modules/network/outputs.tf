output "network_id" {
  description = "Self link / id of the VPC network (projects/P/global/networks/N)."
  value       = google_compute_network.this.id
}

output "network_name" {
  description = "Name of the VPC network."
  value       = google_compute_network.this.name
}

output "functions_subnet_id" {
  description = "Id of the subnet the functions use for Direct VPC egress."
  value       = time_sleep.functions_subnet_release.triggers["subnet_id"] # = google_compute_subnetwork.this["functions"].id
}

output "functions_subnet_name" {
  description = "Name of the subnet the functions use for Direct VPC egress."
  value       = google_compute_subnetwork.this["functions"].name
}

output "psc_subnet_id" {
  description = "Id of the subnet that hosts Private Service Connect endpoints (Redis Cluster)."
  value       = google_compute_subnetwork.this["psc"].id
}

output "private_services_range_name" {
  description = "Name of the allocated private services access range."
  value       = google_compute_global_address.private_services.name
}

output "private_services_connection" {
  description = "The google_service_networking_connection id. Pass it to modules whose resources need private services access so that they depend on it explicitly (and are destroyed before its peering is removed)."
  value       = terraform_data.private_services_peering.output.connection
}

output "secondary_functions_subnet_id" {
  description = "Id of the second region's Direct VPC egress subnet (null without secondary_region); taken through the destroy-time wait, like functions_subnet_id."
  value       = var.secondary_region == null ? null : time_sleep.secondary_functions_subnet_release[0].triggers["subnet_id"]
}

output "secondary_psc_subnet_id" {
  description = "Id of the second region's subnet for Private Service Connect endpoints (its Redis Cluster); null without secondary_region."
  value       = var.secondary_region == null ? null : google_compute_subnetwork.secondary["psc"].id
}
