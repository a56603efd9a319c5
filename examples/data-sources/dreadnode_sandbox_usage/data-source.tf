data "dreadnode_sandbox_usage" "this_org" {}

output "runtime_hours_this_month" {
  value = data.dreadnode_sandbox_usage.this_org.current_month_seconds / 3600
}
