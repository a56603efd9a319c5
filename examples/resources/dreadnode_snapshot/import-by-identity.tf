# Terraform 1.12 or later: import by resource identity.
import {
  to = dreadnode_snapshot.prepared
  identity = {
    id = "template-id"
  }
}
