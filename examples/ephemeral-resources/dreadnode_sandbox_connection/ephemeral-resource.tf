# Terraform 1.11 or later. A sandbox whose secrets never reach plan or state:
# environment variables are write-only, and the access token comes from an
# ephemeral connection opened at every run.
resource "dreadnode_sandbox" "agent" {
  template = "base"
  timeout  = 1800

  env_vars_wo = {
    API_TOKEN = var.api_token
  }
  # Bump to re-create the sandbox with new env_vars_wo values.
  env_vars_wo_version = 1
}

variable "api_token" {
  type      = string
  sensitive = true
  ephemeral = true
}

ephemeral "dreadnode_sandbox_connection" "agent" {
  sandbox_id = dreadnode_sandbox.agent.id
}

# Ephemeral values may be used by provisioners, provider blocks and
# write-only arguments; Terraform keeps them out of the state.
resource "terraform_data" "seed" {
  triggers_replace = [dreadnode_sandbox.agent.id]

  provisioner "local-exec" {
    command = "curl -fsS -X PUT --data-binary @seed.json -H \"X-API-Key: $DREADNODE_API_KEY\" -H \"X-Access-Token: $TOKEN\" \"$URL/files?path=/tmp/seed.json\""
    environment = {
      TOKEN = ephemeral.dreadnode_sandbox_connection.agent.access_token
      URL   = ephemeral.dreadnode_sandbox_connection.agent.envd_url
    }
  }
}
