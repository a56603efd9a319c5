resource "dreadnode_sandbox" "worker" {
  timeout = 600
}

# Read a sandbox by id (here one this configuration manages).
data "dreadnode_sandbox" "worker" {
  id = dreadnode_sandbox.worker.id
}

output "worker_state" {
  value = data.dreadnode_sandbox.worker.state
}
