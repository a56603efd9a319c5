# Import a sandbox by its id. The plan after the import is empty when the
# configuration matches what the API reports (template, timeout, metadata,
# auto_pause, auto_resume, paused). Arguments the API never returns
# (env_vars, resources, network, command) are adopted from the configuration
# by the next apply, which changes nothing on the server. The access token
# cannot be recovered by an import (the API shows it only at create and
# connect): it is null until the sandbox is resumed or re-created; use the
# dreadnode_sandbox_connection ephemeral resource for a fresh one.
terraform import dreadnode_sandbox.agent <sandbox-id>
