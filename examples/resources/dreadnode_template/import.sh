# Import a template by its id. The API reports the template's name, its
# newest build's resources and commands, but not the build's base image or
# steps: the first apply after the import builds the template once more
# from the configuration (a new build of the same template; unchanged steps
# come from the build cache).
terraform import dreadnode_template.tools <template-id>
