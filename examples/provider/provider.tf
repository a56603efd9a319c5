terraform {
  required_providers {
    dreadnode = {
      source = "dreadnode/dreadnode"
    }
  }
}

# Each setting defaults from the environment: DREADNODE_API_URL,
# DREADNODE_API_KEY, DREADNODE_ORG and DREADNODE_WORKSPACE. `make run` prints
# the values for a local backend (org "dev").
provider "dreadnode" {
  api_url   = "http://127.0.0.1:8080"
  org       = "dev"
  workspace = "main"
  # api_key = "..."  # better taken from DREADNODE_API_KEY
}
