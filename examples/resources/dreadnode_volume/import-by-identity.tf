# Terraform 1.12 or later: import by resource identity.
import {
  to = dreadnode_volume.datasets
  identity = {
    id = "volume-id"
  }
}
