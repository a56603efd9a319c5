terraform {
  required_providers {
    dreadnode = {
      source = "dreadnode/dreadnode"
    }
  }
}

# Every setting defaults from the environment: DREADNODE_API_URL,
# DREADNODE_API_KEY, DREADNODE_ORG and DREADNODE_WORKSPACE (`make run` prints
# them for a local backend). Set an attribute only to override its variable,
# e.g. workspace = "main".
provider "dreadnode" {}
