# A volume of the organization that outlives every sandbox: sandboxes
# mount it by name (create's volumeMounts with shared = true), several at
# once. Destroying it deletes its contents; it is refused while a sandbox
# that has not ended mounts it.
resource "dreadnode_volume" "datasets" {
  name = "datasets"
}

output "volume_id" {
  value = dreadnode_volume.datasets.id
}
