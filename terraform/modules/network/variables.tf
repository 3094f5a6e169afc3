variable "project_id" {
  type        = string
  description = "Google Cloud project that owns the network."
}

variable "region" {
  type        = string
  description = "Region of the subnets (the functions, Redis and Cloud SQL all live here)."
}

variable "name" {
  type        = string
  description = "Prefix for every network resource name, e.g. \"seatlease-dev\"."
}

variable "functions_max_instances" {
  type        = map(number)
  description = "max_instance_count of every function that uses the Direct VPC egress subnet, by function name (the functions module's max_instance_counts output); the subnet is sized from it (sizing.tf)."

  validation {
    condition     = alltrue([for n in values(var.functions_max_instances) : n >= 1 && floor(n) == n])
    error_message = "functions_max_instances values are whole numbers of at least 1."
  }
}

variable "functions_subnet_cidr" {
  type        = string
  description = "Primary range of the subnet used by Direct VPC egress of the functions. null (default): sized from functions_max_instances, about two addresses per instance in /28 blocks per function and at least a /26 (sizing.tf). A range given here must hold as much; the plan fails otherwise."
  default     = null
}

variable "psc_subnet_cidr" {
  type        = string
  description = "Range of the subnet that hosts the Private Service Connect endpoints of Memorystore for Redis Cluster (used only when the cluster variant is selected)."
  default     = "10.10.1.0/28"
}

variable "private_services_prefix_length" {
  type        = number
  description = "Prefix length of the private services access range allocated to Google-managed services (Cloud SQL and Memorystore for Redis). /20 leaves room for both and for growth."
  default     = 20

  validation {
    condition     = var.private_services_prefix_length >= 16 && var.private_services_prefix_length <= 24
    error_message = "private_services_prefix_length must be between 16 and 24."
  }
}

variable "flow_log_sampling" {
  type        = number
  description = "Fraction of VPC flow log records kept on the subnets (0 to 1)."
  default     = 0.5
}

variable "functions_subnet_release_wait" {
  type        = string
  description = "On destroy, how long to wait between deleting the functions and deleting their Direct VPC egress subnet (Cloud Run releases the subnet's addresses 1 to 2 hours after its services are deleted)."
  default     = "120m"

  validation {
    condition     = can(regex("^[0-9]+[smh]$", var.functions_subnet_release_wait))
    error_message = "functions_subnet_release_wait is a duration such as 90m or 2h."
  }
}

variable "secondary_region" {
  type        = string
  description = "Second region of a two-region stack (modules/stack's secondary_region): its functions subnet and PSC subnet are created there. null (default): one region, nothing else is created."
  default     = null

  validation {
    condition     = var.secondary_region == null || (can(regex("^[a-z]+-[a-z]+[0-9]+$", var.secondary_region)) && var.secondary_region != var.region)
    error_message = "secondary_region is a region name such as europe-west4, other than region."
  }
}

variable "secondary_functions_subnet_cidr" {
  type        = string
  description = "Range of the second region's Direct VPC egress subnet. null (default): the size of the first region's, sized the same way (sizing.tf), in 10.11.0.0/16. It must not overlap any other subnet or the private services access range."
  default     = null

  validation {
    condition     = var.secondary_functions_subnet_cidr == null || can(cidrhost(var.secondary_functions_subnet_cidr, 0))
    error_message = "secondary_functions_subnet_cidr must be an IPv4 range such as 10.11.0.0/24."
  }
}

variable "secondary_psc_subnet_cidr" {
  type        = string
  description = "Range of the second region's subnet for the Private Service Connect endpoints of its Redis Cluster (used only with secondary_region)."
  default     = "10.11.1.0/28"

  validation {
    condition     = can(cidrhost(var.secondary_psc_subnet_cidr, 0))
    error_message = "secondary_psc_subnet_cidr must be an IPv4 range such as 10.11.1.0/28."
  }
}

variable "webhook_sender_tag" {
  type        = string
  description = "Network tag of the functions that call webhook receivers (the functions module's webhook_sender_tag): egress firewall rules keep them off the VPC's private ranges except Cloud SQL."
  default     = "seatlease-webhook-senders"
}
