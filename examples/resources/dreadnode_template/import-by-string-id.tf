# Terraform 1.5 or later: import in the plan, with an import block.
import {
  to = dreadnode_template.tools
  id = "template-id"
}
