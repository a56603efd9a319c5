# A read-only key for a dashboard, and a full key for CI that stops working
# at the end of the year. The secrets are in the state (sensitive): pass
# them on with a sensitive output or straight into a secret store.
resource "dreadnode_api_key" "dashboard" {
  name  = "grafana dashboard"
  scope = "read"
}

resource "dreadnode_api_key" "ci" {
  name       = "ci: nightly evals"
  expires_at = "2099-12-31T23:59:59Z"
}

output "ci_api_key" {
  value     = dreadnode_api_key.ci.key
  sensitive = true
}
