terraform {
  # Provider requirements come from modules/stack and the modules it calls. No backend
  # block: the state stays in this directory (terraform.tfstate). It holds the Redis
  # AUTH string in clear text; keep it private (see terraform/README.md).
  required_version = ">= 1.11"
}

provider "google" {
  project = var.project_id
  region  = var.region

  default_labels = {
    app = "seatlease"
    env = "example"
  }
}
