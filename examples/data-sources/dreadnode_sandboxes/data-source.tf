resource "dreadnode_sandbox" "crew" {
  count    = 2
  timeout  = 600
  metadata = { crew = "blue" }
}

# Every running sandbox of the crew.
data "dreadnode_sandboxes" "blue" {
  state    = ["running"]
  metadata = { crew = "blue" }

  depends_on = [dreadnode_sandbox.crew]
}

output "blue_sandbox_ids" {
  value = data.dreadnode_sandboxes.blue.ids
}
