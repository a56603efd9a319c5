# Provision once, start many: a sandbox prepared by its command, a snapshot
# of its filesystem, and a sandbox started from the snapshot. The snapshot
# keeps files, not memory: the new sandbox runs its command again.
resource "dreadnode_sandbox" "prepared" {
  template = "base"
  timeout  = 600
  command  = ["sh", "-c", "mkdir -p /opt/tools && echo ready > /opt/tools/state && exec sleep 3600"]
}

resource "dreadnode_snapshot" "prepared" {
  sandbox_id = dreadnode_sandbox.prepared.id
  name       = "prepared:v1"

  timeouts {
    create = "10m"
  }
}

# snapshot_id ("prepared:v1") names this snapshot's tag; template_id names
# the template's default tag, which a tagged name does not move.
resource "dreadnode_sandbox" "worker" {
  template = dreadnode_snapshot.prepared.snapshot_id
  timeout  = 600
}

output "snapshot" {
  value = {
    template_id = dreadnode_snapshot.prepared.template_id
    snapshot_id = dreadnode_snapshot.prepared.snapshot_id
    size_bytes  = dreadnode_snapshot.prepared.size_bytes
  }
}
