variable "project_id" {
  type        = string
  description = "Google Cloud project of the load balancer (the functions' project)."
}

variable "name" {
  type        = string
  description = "Prefix of the load balancer's resource names, e.g. \"seatlease-prod\" (NEGs and backend services are NAME-FUNCTION-REGION)."

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{2,13}$", var.name))
    error_message = "name must be 3-14 characters of a-z, 0-9 and -, starting with a letter."
  }
}

variable "service_names" {
  type        = map(map(string))
  description = "The functions' Cloud Run service names by region, then by function name: both regions of the stack (the functions module's service_names and secondary_service_names)."

  validation {
    condition     = length(var.service_names) == 2
    error_message = "service_names holds the two regions of a two-region stack."
  }
}

variable "serving_region" {
  type        = string
  description = "Region whose serving_functions take the traffic (a key of service_names). Changed by the operator after a failover (docs/operations.md)."

  validation {
    condition     = contains(keys(var.service_names), var.serving_region)
    error_message = "serving_region must be one of the regions of service_names."
  }
}

variable "serving_functions" {
  type        = list(string)
  description = "Functions served from serving_region only (they write to Redis or Cloud SQL, which take writes in one region): one backend service per region, the URL map picks the serving region's."
  default     = ["acquire", "heartbeat", "release", "portal"]
}

variable "everywhere_functions" {
  type        = list(string)
  description = "Stateless functions served from every region at once (the nearest answers, outlier detection ejects a failing region): one backend service with both regions' NEGs."
  default     = ["keys"]

  validation {
    condition     = length(setintersection(toset(var.everywhere_functions), toset(var.serving_functions))) == 0
    error_message = "A function is either in serving_functions or in everywhere_functions."
  }
}

variable "default_function" {
  type        = string
  description = "Serving function that answers paths no function is named after (the portal page at /)."
  default     = "portal"

  validation {
    condition     = contains(var.serving_functions, var.default_function)
    error_message = "default_function must be one of serving_functions."
  }
}

variable "domains" {
  type        = list(string)
  description = "DNS names of the load balancer: a Google-managed certificate is created for them (it becomes active once each name resolves to the address). Empty: ssl_certificates must hold a certificate."
  default     = []

  validation {
    condition     = alltrue([for d in var.domains : can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z]{2,63}$", d))])
    error_message = "domains must be lower-case DNS names such as seats.example.com."
  }
}

variable "ssl_certificates" {
  type        = list(string)
  description = "Ids of existing Compute Engine SSL certificates (projects/P/global/sslCertificates/N) the proxy serves besides (or instead of) the managed one."
  default     = []

  validation {
    condition     = length(var.domains) + length(var.ssl_certificates) > 0
    error_message = "The HTTPS proxy needs a certificate: give domains (a Google-managed certificate) or ssl_certificates."
  }
}

variable "security_policy" {
  type        = string
  description = "Cloud Armor security policy (id) attached to every backend service; null: the policy this module creates (a per-client-IP rate limit, rate_limit_per_ip)."
  default     = null
}

variable "rate_limit_per_ip" {
  type        = number
  description = "Requests a minute one client IP may send before Cloud Armor answers 429 (the policy this module creates when security_policy is null). High on purpose: a site's licensed products often share one NAT address, each heartbeating; the per-tenant limits are in the functions."
  default     = 3000

  validation {
    condition     = var.rate_limit_per_ip >= 60
    error_message = "rate_limit_per_ip is at least 60 (one a second)."
  }
}

variable "notification_channels" {
  type        = list(string)
  description = "Monitoring notification channel ids the load balancer's 5xx alert notifies."
  default     = []
}

variable "lb_5xx_per_second" {
  type        = number
  description = "5xx a second from the load balancer to one backend, over two minutes, above which its alert fires."
  default     = 0.5
}

variable "log_sample_rate" {
  type        = number
  description = "Fraction (0 to 1) of the load balancer's requests logged (the functions log every request themselves)."
  default     = 0.1

  validation {
    condition     = var.log_sample_rate >= 0 && var.log_sample_rate <= 1
    error_message = "log_sample_rate is between 0 and 1."
  }
}

variable "outlier_consecutive_errors" {
  type        = number
  description = "5xx answers in a row after which a region's NEG of an everywhere function is ejected (for 30 s, longer each time)."
  default     = 5

  validation {
    condition     = var.outlier_consecutive_errors >= 1
    error_message = "outlier_consecutive_errors is at least 1."
  }
}

variable "labels" {
  type        = map(string)
  description = "Labels set on the address and the forwarding rule."
  default     = {}
}
