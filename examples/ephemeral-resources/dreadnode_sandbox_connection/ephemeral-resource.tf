# Terraform 1.11 or later. A sandbox whose secrets never reach plan or state:
# environment variables are write-only, and the access token comes from an
# ephemeral connection opened at every run.
variable "api_token" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "dreadnode_sandbox" "worker" {
  template = "base"
  timeout  = 1800

  env_vars_wo = {
    API_TOKEN = var.api_token
  }
  # Bump to re-create the sandbox with new env_vars_wo values.
  env_vars_wo_version = 1
}

ephemeral "dreadnode_sandbox_connection" "worker" {
  sandbox_id = dreadnode_sandbox.worker.id
}

# Ephemeral values may be used by provisioners, provider blocks and
# write-only arguments; Terraform keeps them out of the state. Here a
# provisioner runs a command in the sandbox once it exists.
resource "terraform_data" "warm_up" {
  triggers_replace = [dreadnode_sandbox.worker.id]

  provisioner "local-exec" {
    command = "curl -fsS -H \"X-API-Key: $DREADNODE_API_KEY\" -H \"X-Access-Token: $TOKEN\" -d '{\"cmd\": [\"sh\", \"-c\", \"test -n \\\"$API_TOKEN\\\"\"]}' \"$URL/exec\""
    environment = {
      TOKEN = ephemeral.dreadnode_sandbox_connection.worker.access_token
      URL   = ephemeral.dreadnode_sandbox_connection.worker.envd_url
    }
  }
}
