# Import a task environment by its id. The execute token is returned only
# when the environment is created, so it is null after an import; re-create
# the environment (terraform apply -replace=...) if you need one.
terraform import dreadnode_task_environment.login <environment-id>
