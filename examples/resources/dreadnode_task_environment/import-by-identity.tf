# Terraform 1.12 or later: import by resource identity.
import {
  to = dreadnode_task_environment.login
  identity = {
    id = "environment-id"
  }
}
