output "ip_address" {
  description = "The load balancer's IPv4 address: the A record of every name in domains."
  value       = google_compute_global_address.this.address
}

output "urls" {
  description = "URL of every function behind the load balancer, by function name (https://FIRST_DOMAIN/NAME, or the address when no domain is given)."
  value = {
    for fn in concat(var.serving_functions, var.everywhere_functions) : fn => "https://${length(var.domains) > 0 ? var.domains[0] : google_compute_global_address.this.address}/${fn}"
  }
}

output "routes" {
  description = "Where each function's paths go: serving/FUNCTION-REGION (the serving region's backend service) or everywhere/FUNCTION."
  value       = local.routes
}

output "url_map_id" {
  description = "Id of the URL map."
  value       = google_compute_url_map.this.id
}

output "backend_service_ids" {
  description = "Ids of the backend services, by serving/FUNCTION-REGION and everywhere/FUNCTION."
  value       = local.backend_ids
}
