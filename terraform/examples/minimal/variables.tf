variable "project_id" {
  type        = string
  description = "Google Cloud project to deploy into (billing enabled; a project of its own)."
}

variable "region" {
  type        = string
  description = "Region of every regional resource."
  default     = "europe-west1"
}

variable "name" {
  type        = string
  description = "Prefix of resource names (3-14 characters, a-z 0-9 -)."
  default     = "seatlease-ex"
}

variable "admin_invokers" {
  type        = list(string)
  description = "IAM members allowed to call the admin function, e.g. [\"user:you@example.com\"]."
  default     = []
}
