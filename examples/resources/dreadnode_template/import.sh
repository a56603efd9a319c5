# Import a template by its id. The API reports the template's name, its
# newest build's resources and commands, but not the build's base image,
# steps or tags: the first apply after the import adopts them from the
# configuration without building (make sure they are the template's).
terraform import dreadnode_template.tools <template-id>
