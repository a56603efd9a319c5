# The newest version of a catalog task.
data "dreadnode_task" "login" {
  ref = "web-login"
}

resource "dreadnode_task_environment" "login" {
  task_ref = data.dreadnode_task.login.id # org/name@version
  inputs = {
    flag = data.dreadnode_task.login.inputs["flag"].default
  }
}

output "login_services" {
  value = data.dreadnode_task.login.services
}
