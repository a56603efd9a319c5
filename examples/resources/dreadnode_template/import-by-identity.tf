# Terraform 1.12 or later: import by resource identity.
import {
  to = dreadnode_template.tools
  identity = {
    id = "template-id"
  }
}
