# Import a sandbox by its id. The access token cannot be recovered by an
# import (the API shows it only at create and connect): it is null until the
# sandbox is resumed (paused = false after true) or re-created.
terraform import dreadnode_sandbox.agent <sandbox-id>
