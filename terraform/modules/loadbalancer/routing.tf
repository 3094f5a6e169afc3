# What the load balancer routes where, from the variables only (no resources), so that
# the tests can have Terraform evaluate it (tests/terraform/test_two_regions.py).
#
# Two kinds of function sit behind it:
#
#   * serving_functions (acquire, heartbeat, release, portal) keep state in Redis and
#     Cloud SQL, which take writes in one region only: the second region's Redis Cluster
#     is a read-only secondary until `gcloud redis clusters switchover`, and its Cloud SQL
#     a read replica until promoted. A backend service holding both regions' serverless
#     NEGs would send each client to its nearest region (that is how a global external
#     Application Load Balancer spreads requests over serverless NEGs), i.e. half the
#     clients to a region that cannot write. So each of these functions has one backend
#     service per region, and the URL map sends its path to the serving region's: a
#     failover is the operator's switchover, `seatlease failover begin`, then
#     serving_region (docs/operations.md: the recovery mark must be set before traffic
#     arrives). Neither Redis nor the database could take the writes any sooner.
#   * everywhere_functions (keys: the JWKS, public keys read from Secret Manager) hold no
#     state: one backend service with both regions' NEGs and outlier detection, so
#     clients get the nearest region and the other one when a region answers 5xx.
#
# (A backend service's failover_policy exists only for passthrough Network Load
# Balancers and internal backend services, and preferred backends need a balancing mode,
# which serverless NEGs do not have.)

locals {
  regions = keys(var.service_names)

  # One serverless NEG per function and region: "FUNCTION-REGION" => what it points at.
  negs = merge([
    for region, services in var.service_names : {
      for fn in concat(var.serving_functions, var.everywhere_functions) : "${fn}-${region}" => {
        function = fn
        region   = region
        service  = services[fn]
      }
    }
  ]...)

  # One backend service per serving function and region (the NEG of the same key).
  serving_backends = {
    for key, neg in local.negs : key => neg if contains(var.serving_functions, neg.function)
  }

  # The paths of each function: /NAME and everything under it (the functions answer by
  # method, not by path, so no rewrite is needed).
  paths = {
    for fn in concat(var.serving_functions, var.everywhere_functions) : fn => ["/${fn}", "/${fn}/*"]
  }

  # Where each function's paths go: "serving/KEY" (a key of serving_backends, in the
  # serving region) or "everywhere/FUNCTION".
  routes = merge(
    { for fn in var.serving_functions : fn => "serving/${fn}-${var.serving_region}" },
    { for fn in var.everywhere_functions : fn => "everywhere/${fn}" },
  )
  default_route = "serving/${var.default_function}-${var.serving_region}"

  # A host for the URL map's tests (checked by the API on every change of the map).
  test_host = length(var.domains) > 0 ? var.domains[0] : "seatlease.invalid"
}
