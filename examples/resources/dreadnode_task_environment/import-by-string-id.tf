# Terraform 1.5 or later: import in the plan, with an import block. The
# execute token is not recovered (the server returns it only at create).
import {
  to = dreadnode_task_environment.login
  id = "environment-id"
}
