# A sandbox from the default template that lives 30 minutes.
resource "dreadnode_sandbox" "agent" {
  template = "base"
  timeout  = 1800

  env_vars = {
    TARGET_URL = "http://example.internal"
  }
  metadata = {
    team    = "red"
    purpose = "docs-example"
  }
  resources = {
    cpu_count = 1
    memory_mb = 512
  }
  network = {
    allow_internet_access = false
  }

  # Flip to true to pause it (no credits accrue); false resumes it.
  paused = false

  timeouts {
    create = "5m"
  }
}

output "sandbox_id" {
  value = dreadnode_sandbox.agent.id
}

# Sent as X-Access-Token to exec, files and the traffic router.
output "sandbox_access_token" {
  value     = dreadnode_sandbox.agent.access_token
  sensitive = true
}
