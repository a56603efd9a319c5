# A volume of the organization that outlives every sandbox: sandboxes
# mount it by name, several at once. Destroying it deletes its contents;
# the API refuses while a sandbox that has not ended mounts it, and the
# reference below makes Terraform delete the sandbox first.
resource "dreadnode_volume" "datasets" {
  name = "datasets"
}

resource "dreadnode_sandbox" "loader" {
  template = "base"
  timeout  = 600

  volume_mounts = [{
    name = dreadnode_volume.datasets.name
    path = "/datasets"
  }]
}

output "volume_id" {
  value = dreadnode_volume.datasets.id
}
