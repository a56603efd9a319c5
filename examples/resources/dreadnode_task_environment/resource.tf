# An environment of the catalog task "web-login" (tasks/web-login in the
# backend's repository), with its flag overridden.
resource "dreadnode_task_environment" "login" {
  task_ref    = "web-login"
  timeout_sec = 3600

  inputs = {
    flag = "FLAG{terraform-example}"
  }

  timeouts {
    create = "15m"
    delete = "10m"
  }
}

output "login_url" {
  value = dreadnode_task_environment.login.service_urls["web"].url
}

output "login_instruction" {
  value = dreadnode_task_environment.login.instruction
}

# For POST .../environments/{id}/execute (header X-Environment-Token).
output "login_execute_token" {
  value     = dreadnode_task_environment.login.execute_token
  sensitive = true
}
