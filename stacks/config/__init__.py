"""A stack's configuration at the edge of the system: the stack file read so that what it says
is what it means (stack_file), the typed schema of every Pulumi config key (schema,
schema_base, schema_cluster, recipe_config, workload_config, revision), the deployer's own keys
(api_access, campaign_config), the loader that turns both into a validated StackConfig, and the
errors that name the field and the fix.

Config imports only the catalogue (a model id or instance type is checked against it); it never
imports pre-flight, the plan or anything outside stacks/.
"""
