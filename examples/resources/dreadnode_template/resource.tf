# A template built from a local image and E2B's build steps. The apply waits
# for the build; a failed build fails the apply with the build's error and
# the end of its log.
resource "dreadnode_template" "tools" {
  name       = "tools"
  from_image = "dreadnode/base:latest" # an image on the backend's Docker host (nothing is pulled)
  cpu_count  = 2
  memory_mb  = 512

  steps = [
    { type = "RUN", args = ["echo 'export PS1=tools$ ' >> /etc/profile"] },
    { type = "ENV", args = ["APP_ENV", "ci"] },
    { type = "WORKDIR", args = ["/work"] },
  ]

  # Changing a step (or any build input) is a new build of the same
  # template: the id and name stay, unchanged steps come from the cache.
}

# A sandbox started from the template's newest build.
resource "dreadnode_sandbox" "from_tools" {
  template = dreadnode_template.tools.id
  timeout  = 600
}
