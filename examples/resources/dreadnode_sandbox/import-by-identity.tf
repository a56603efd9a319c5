# Terraform 1.12 or later: import by resource identity.
import {
  to = dreadnode_sandbox.agent
  identity = {
    id = "sandbox-id"
  }
}
