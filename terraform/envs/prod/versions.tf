terraform {
  # The provider requirements (google >= 7.31 < 8.0, random, external, time) are declared by
  # modules/stack and the modules it calls; `terraform init` writes the exact versions
  # to .terraform.lock.hcl.
  required_version = ">= 1.11"

  # Partial configuration: the bucket and prefix are given at init time, e.g.
  #   terraform init -backend-config="bucket=MY-STATE-BUCKET" -backend-config="prefix=seatlease/prod"
  backend "gcs" {}
}

provider "google" {
  project = var.project_id
  region  = var.region

  default_labels = {
    app = "seatlease"
    env = local.environment
  }
}
