# Size of the Direct VPC egress subnet, from the functions' maximum instance counts.
#
# Cloud Run takes about two addresses of the subnet per instance (an instance being
# replaced and its successor overlap, e.g. during a revision rollout) and reserves them
# per function in blocks of 16 (/28); Google asks for at least a /26, and keeps 4
# addresses of every subnet. So each function needs 2 x max_instance_count rounded up to
# a multiple of 16, and the subnet is the smallest of /26 to /20 that holds their sum.
#
# Placement when functions_subnet_cidr is null: a /24 to /26 starts at 10.10.0.0 (the
# range stacks have always used); a larger one is the second block of its size in
# 10.10.0.0/16, because the first holds the PSC subnet (10.10.1.0/28). The second
# region's functions (secondary_region) run the same functions with the same maximums:
# their subnet has the same size, placed the same way in 10.11.0.0/16 (its PSC subnet is
# 10.11.1.0/28), unless secondary_functions_subnet_cidr says otherwise.

locals {
  functions_addresses_needed = sum(concat([0], [
    for fn, max in var.functions_max_instances : ceil(2 * max / 16) * 16
  ]))

  functions_subnet_prefixes = [
    for prefix in range(26, 19, -1) : prefix if pow(2, 32 - prefix) - 4 >= local.functions_addresses_needed
  ]
  functions_subnet_auto_prefix = try(local.functions_subnet_prefixes[0], 20)

  functions_subnet_cidr = coalesce(
    var.functions_subnet_cidr,
    cidrsubnet("10.10.0.0/16", local.functions_subnet_auto_prefix - 16, local.functions_subnet_auto_prefix >= 24 ? 0 : 1),
  )
  functions_subnet_prefix   = tonumber(split("/", local.functions_subnet_cidr)[1])
  functions_subnet_capacity = pow(2, 32 - local.functions_subnet_prefix) - 4

  secondary_functions_subnet_cidr = coalesce(
    var.secondary_functions_subnet_cidr,
    cidrsubnet("10.11.0.0/16", local.functions_subnet_auto_prefix - 16, local.functions_subnet_auto_prefix >= 24 ? 0 : 1),
  )
  secondary_functions_subnet_prefix   = tonumber(split("/", local.secondary_functions_subnet_cidr)[1])
  secondary_functions_subnet_capacity = pow(2, 32 - local.secondary_functions_subnet_prefix) - 4
}

# Fails the plan (not a warning: a check block would only warn) when the subnet cannot
# hold every function at its maximum instance count, or is smaller than a /26.
resource "terraform_data" "functions_subnet_size" {
  input = {
    cidr             = local.functions_subnet_cidr
    addresses_needed = local.functions_addresses_needed
  }

  lifecycle {
    precondition {
      condition     = local.functions_subnet_prefix <= 26 && local.functions_subnet_capacity >= local.functions_addresses_needed
      error_message = "The Direct VPC egress subnet ${local.functions_subnet_cidr} has ${local.functions_subnet_capacity} usable addresses; the functions need ${local.functions_addresses_needed} (about 2 per instance of the sum of max_instance_count, in /28 blocks per function) and Cloud Run at least a /26. Lower max_instances or set a larger functions_subnet_cidr."
    }
  }
}

# The same check for the second region's subnet (only with secondary_region).
resource "terraform_data" "secondary_functions_subnet_size" {
  count = var.secondary_region == null ? 0 : 1

  input = {
    cidr             = local.secondary_functions_subnet_cidr
    addresses_needed = local.functions_addresses_needed
  }

  lifecycle {
    precondition {
      condition     = local.secondary_functions_subnet_prefix <= 26 && local.secondary_functions_subnet_capacity >= local.functions_addresses_needed
      error_message = "The second region's Direct VPC egress subnet ${local.secondary_functions_subnet_cidr} has ${local.secondary_functions_subnet_capacity} usable addresses; the functions need ${local.functions_addresses_needed} (about 2 per instance of the sum of max_instance_count, in /28 blocks per function) and Cloud Run at least a /26. Lower max_instances or set a larger secondary_functions_subnet_cidr."
    }
  }
}
